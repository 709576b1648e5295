import { runSingleService } from "@core/launcher";
import * as stackRegistry from "./index.js";

/** Production entry: this one service, configured from the environment (DESIGN §1). */
await runSingleService("stack-registry", stackRegistry);
