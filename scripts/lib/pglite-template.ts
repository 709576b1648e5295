// Run by scripts/prepare.mjs: makes the installation's PGlite template data directory (ADR 0016).
import { pgliteTemplate } from "@core/storage";

const started = Date.now();
try {
  const template = await pgliteTemplate();
  console.log(template ? `core: PGlite template ready in ${Date.now() - started} ms (${template.dir})` : "core: PGlite is not installed where expected; new data directories will run initdb");
} catch (err) {
  // never fails the install: without the template, a new data directory only starts more slowly
  console.warn(`core: could not make the PGlite template (${(err as Error).message}); new data directories will run initdb`);
}
