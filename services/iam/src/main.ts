import { runSingleService } from "@core/launcher";
import * as iam from "./index.js";

/** Production entry: IAM alone, configured from the environment (DESIGN §1). */
await runSingleService("iam", iam);
