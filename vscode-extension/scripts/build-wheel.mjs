// Builds the project's own wheel (pure Python) into server/, which the .vsix ships: the command
// "CUDA-LLM: Install/Update Server" installs it into a private venv. Run by `npm run package`.
//
// The interpreter: $CUDA_LLM_PYTHON, else the repository's .venv, else python3. pip builds in an
// isolated environment (setuptools from the package index, as `pip install .` does).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repo = path.resolve(root, '..');
const out = path.join(root, 'server');
const candidates = [process.env.CUDA_LLM_PYTHON, path.join(repo, '.venv', 'bin', 'python'), 'python3'].filter(Boolean);
const python = candidates.find((p) => p === 'python3' || fs.existsSync(p));

if (!fs.existsSync(path.join(repo, 'pyproject.toml'))) {
    console.error(`build-wheel: no pyproject.toml in ${repo}: the wheel is built from the repository`);
    process.exit(1);
}
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });
const r = spawnSync(python, ['-m', 'pip', 'wheel', '--no-deps', '--disable-pip-version-check', '-q', '-w', out, repo], {
    stdio: 'inherit',
    timeout: 600_000,
});
if (r.error || r.status !== 0) {
    console.error(`build-wheel: \`${python} -m pip wheel\` failed (${r.error?.message ?? `exit ${r.status}`})`);
    process.exit(1);
}
const wheels = fs.readdirSync(out).filter((n) => /^cuda_llm_lsp-.*-py3-none-any\.whl$/.test(n));
if (wheels.length !== 1) {
    console.error(`build-wheel: expected one pure-Python cuda_llm_lsp wheel in ${out}, found: ${fs.readdirSync(out).join(', ') || 'nothing'}`);
    process.exit(1);
}
console.log(`build-wheel: server/${wheels[0]}`);
