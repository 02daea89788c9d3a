/**
 * No Python the extension starts imports a workspace file (issue 36): Python puts the current
 * directory first on `sys.path` for `-m` and `-c`, so a repository's `cuda_llm_lsp.py` or
 * `argparse.py` ran inside the server and the install check when they started in the workspace.
 * Real interpreters, started with the extension's own spawn code, next to a planted module that
 * leaves a mark when imported; the first test shows the plant works (it fails without the fix).
 */

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { STEP_ENV, installSteps, neutralDir, runStep, venvPaths } from '../../src/common/managedServer';
import { checkServerInstalled, runProcess, serverEnv } from '../../src/common/serverCommand';
import { ServerProcesses } from '../../src/common/serverProcesses';

const PYTHON = 'python3';
const version = spawnSync(PYTHON, ['-c', 'import sys; print(sys.version_info[1])'], { encoding: 'utf8' });
const minor = version.status === 0 ? Number(version.stdout.trim()) : undefined;
const skip = minor === undefined ? 'no python3 on PATH' : false;
// Whether python3 has a cuda_llm_lsp of its own (CI runs these tests inside the project's venv),
// asked from an empty directory so the answer never comes from a workspace.
const ownServer = (): boolean => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-empty-'));
    try {
        const probe = spawnSync(PYTHON, ['-c', 'import cuda_llm_lsp'], { cwd: empty, env: { ...process.env, PYTHONSAFEPATH: '1' } });
        return probe.status === 0;
    } finally {
        fs.rmSync(empty, { recursive: true, force: true });
    }
};

describe('a workspace module is never imported', { skip }, () => {
    let root: string;
    let workspace: string;
    let mark: string;
    let storage: string;
    const home = process.cwd();

    before(() => {
        root = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-hostile-'));
        workspace = path.join(root, 'repo');
        storage = path.join(root, 'storage');
        fs.mkdirSync(workspace);
        mark = path.join(root, 'imported');
        for (const name of ['cuda_llm_lsp', 'argparse', 'venv', 'pip']) {
            fs.writeFileSync(path.join(workspace, `${name}.py`), `open(${JSON.stringify(mark)}, 'a').write('${name}\\n')\n`);
        }
        // As an extension host started from the repository (`code .`): a child spawned without
        // its own cwd would start there.
        process.chdir(workspace);
    });

    after(() => {
        process.chdir(home);
        fs.rmSync(root, { recursive: true, force: true });
    });

    const marks = (): string => (fs.existsSync(mark) ? fs.readFileSync(mark, 'utf8') : '');

    it('the plant works: `python -c "import cuda_llm_lsp"` started in the workspace imports it', async () => {
        fs.rmSync(mark, { force: true });
        const env = { ...process.env };
        delete env.PYTHONSAFEPATH;
        await runProcess(PYTHON, ['-c', 'import cuda_llm_lsp'], { timeoutMs: 30_000, cwd: workspace, env });
        assert.match(marks(), /cuda_llm_lsp/);
    });

    it('the install check runs in the neutral directory and imports nothing of the workspace', async () => {
        fs.rmSync(mark, { force: true });
        const cwd = neutralDir(storage);
        assert.equal(cwd, path.join(storage, 'process-cwd'));
        assert.ok(fs.statSync(cwd).isDirectory());
        const launch = { command: PYTHON, args: ['-m', 'cuda_llm_lsp'], python: PYTHON };
        const outcome = await checkServerInstalled(launch, runProcess, { cwd });
        assert.equal(marks(), '');
        assert.equal(outcome.ok, ownServer(), 'the check answers for python3\'s own cuda_llm_lsp, never the workspace\'s');
    });

    it('the server process (`python -m cuda_llm_lsp`) starts in the neutral directory', async () => {
        fs.rmSync(mark, { force: true });
        const processes = new ServerProcesses();
        const child = await processes.spawn({ command: PYTHON, args: ['-m', 'cuda_llm_lsp'], python: PYTHON }, neutralDir(storage));
        // Without a cuda_llm_lsp of its own python3 exits at once; with one (CI's venv) the real
        // server starts and waits on stdin, and its imports are done well within 5 s.
        await new Promise<void>((resolve) => {
            if (child.exitCode !== null) return resolve();
            const timer = setTimeout(resolve, 5000);
            child.once('exit', () => {
                clearTimeout(timer);
                resolve();
            });
        });
        await processes.terminate(2000);
        assert.equal(marks(), '');
    });

    it('PYTHONSAFEPATH alone keeps a workspace cwd off sys.path (Python 3.11+)', { skip: minor !== undefined && minor < 11 && 'Python < 3.11 has no PYTHONSAFEPATH' }, async () => {
        fs.rmSync(mark, { force: true });
        const env = serverEnv({ command: PYTHON, args: [], python: PYTHON });
        assert.equal(env.PYTHONSAFEPATH, '1');
        await runProcess(PYTHON, ['-c', 'import cuda_llm_lsp, argparse'], { timeoutMs: 30_000, cwd: workspace, env });
        assert.equal(marks(), '');
    });

    it('the install steps run in the neutral directory with PYTHONSAFEPATH', async () => {
        fs.rmSync(mark, { force: true });
        const steps = installSteps(PYTHON, venvPaths(path.join(root, 'g')), '/nonexistent.whl', false, neutralDir(storage));
        assert.deepEqual(STEP_ENV, { PIP_NO_INPUT: '1', PYTHONSAFEPATH: '1' });
        const [check] = steps; // the real `python3 -c PYTHON_CHECK` (imports venv, ensurepip)
        await runStep(check, () => undefined, new AbortController().signal);
        const importing = { ...steps[steps.length - 1], command: PYTHON }; // `-c "import cuda_llm_lsp"`
        await runStep(importing, () => undefined, new AbortController().signal);
        assert.equal(marks(), '');
    });
});
