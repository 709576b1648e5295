import { runSingleService } from "@core/launcher";
import * as billing from "./index.js";

/** Production entry: this one service, configured from the environment (DESIGN §1). */
await runSingleService("billing", billing);
