import { productionDeps } from "./deps";
import { createWorker } from "./worker";

export default createWorker(productionDeps);
