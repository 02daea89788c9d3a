import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import {
    ProcessRunner,
    RunResult,
    checkServerInstalled,
    notInstalledMessage,
    resolveServerLaunch,
    runProcess,
    serverEnv,
} from '../../src/common/serverCommand';
import { reader } from './helpers';

const NEUTRAL = '/storage/process-cwd';

describe('server launch', () => {
    it('defaults to python3 -m cuda_llm_lsp', () => {
        const r = resolveServerLaunch(reader({ 'server.python': 'python3', 'server.command': [] }));
        assert.deepEqual(r, { ok: true, value: { command: 'python3', args: ['-m', 'cuda_llm_lsp'], python: 'python3' } });
    });

    it('uses the configured interpreter, with variables expanded', () => {
        const r = resolveServerLaunch(reader({ 'server.python': '${workspaceFolder}/.venv/bin/python' }), { workspaceFolder: '/w' });
        assert.ok(r.ok);
        assert.equal(r.value.command, '/w/.venv/bin/python');
        assert.equal(r.value.python, '/w/.venv/bin/python');
    });

    it('falls back to python3 for a blank interpreter', () => {
        const r = resolveServerLaunch(reader({ 'server.python': '  ' }));
        assert.ok(r.ok);
        assert.equal(r.value.command, 'python3');
    });

    it('prefers a full command, which is not import-checked', () => {
        const r = resolveServerLaunch(reader({ 'server.python': 'python3', 'server.command': ['~/bin/cuda-llm-lsp', '--log', 'x'] }), {
            home: '/h',
        });
        assert.deepEqual(r, { ok: true, value: { command: '/h/bin/cuda-llm-lsp', args: ['--log', 'x'] } });
    });

    it('passes the demo/test evaluator to the server as CUDA_LLM_EVALUATOR, variables expanded', () => {
        const r = resolveServerLaunch(reader({ 'server.python': 'python3', 'server.evaluator': ' recorded:${workspaceFolder}/rec.json ' }), {
            workspaceFolder: '/w',
        });
        assert.deepEqual(r, {
            ok: true,
            value: { command: 'python3', args: ['-m', 'cuda_llm_lsp'], python: 'python3', env: { CUDA_LLM_EVALUATOR: 'recorded:/w/rec.json' } },
        });
        for (const gpu of ['', '  ', 'gpu', undefined, null]) {
            const plain = resolveServerLaunch(reader({ 'server.command': ['cuda-llm-lsp'], 'server.evaluator': gpu }));
            assert.deepEqual(plain, { ok: true, value: { command: 'cuda-llm-lsp', args: [] } }, String(gpu));
        }
        for (const bad of ['tpu', 'recorded:', 3]) {
            const wrong = resolveServerLaunch(reader({ 'server.evaluator': bad }));
            assert.ok(!wrong.ok);
            assert.match(wrong.message, /cudaLlm\.server\.evaluator must be empty \(the GPU\) or "recorded:/);
        }
    });

    it("uses the extension's own venv only when neither server.python nor server.command is set", () => {
        const managed = '/storage/server-venv/bin/python';
        for (const python of ['', '  ', undefined]) {
            const r = resolveServerLaunch(reader({ 'server.python': python, 'server.command': [] }), {}, managed);
            assert.deepEqual(r, { ok: true, value: { command: managed, args: ['-m', 'cuda_llm_lsp'], python: managed, managed: true } });
        }
        const chosen = resolveServerLaunch(reader({ 'server.python': '/opt/py/bin/python' }), {}, managed);
        assert.ok(chosen.ok && chosen.value.command === '/opt/py/bin/python' && chosen.value.managed === undefined);
        const command = resolveServerLaunch(reader({ 'server.command': ['cuda-llm-lsp'] }), {}, managed);
        assert.ok(command.ok && command.value.command === 'cuda-llm-lsp');
    });

    it('offers to repair the managed venv when it is broken', async () => {
        const managed = { command: '/s/bin/python', args: ['-m', 'cuda_llm_lsp'], python: '/s/bin/python', managed: true };
        const outcome = await checkServerInstalled(managed, fakeRunner({ code: 1, stderr: "No module named 'cuda_llm_lsp'", timedOut: false }), { cwd: NEUTRAL });
        assert.match(outcome.message ?? '', /Run CUDA-LLM: Install\/Update Server to repair the extension's own server environment/);
        const missing = await checkServerInstalled(managed, fakeRunner({ code: null, errorCode: 'ENOENT', stderr: '', timedOut: false }), { cwd: NEUTRAL });
        assert.match(missing.message ?? '', /`\/s\/bin\/python` was not found\. Run CUDA-LLM: Install\/Update Server/);
    });

    it('rejects a malformed command with a message naming the setting', () => {
        for (const bad of ['cuda-llm-lsp', [''], [1, 2]]) {
            const r = resolveServerLaunch(reader({ 'server.command': bad }));
            assert.ok(!r.ok);
            assert.match(r.message, /cudaLlm\.server\.command must be a list of strings/);
        }
        const r = resolveServerLaunch(reader({ 'server.python': 3 }));
        assert.ok(!r.ok);
        assert.match(r.message, /cudaLlm\.server\.python/);
    });
});

function fakeRunner(result: RunResult, calls: Array<[string, readonly string[]]> = []): ProcessRunner {
    return async (command, args) => {
        calls.push([command, args]);
        return result;
    };
}

describe('install check', () => {
    const launch = { command: '/venv/bin/python', args: ['-m', 'cuda_llm_lsp'], python: '/venv/bin/python' };

    it('runs the check in the neutral directory with PYTHONSAFEPATH, PYTHONPATH kept', async () => {
        let seen: { cwd?: string; env?: NodeJS.ProcessEnv } = {};
        const run: ProcessRunner = async (_command, _args, options) => {
            seen = options;
            return { code: 0, stderr: '', timedOut: false };
        };
        await checkServerInstalled(launch, run, { cwd: NEUTRAL, env: { PATH: '/bin', PYTHONPATH: '/src' } });
        assert.equal(seen.cwd, NEUTRAL);
        assert.deepEqual(seen.env, { PATH: '/bin', PYTHONPATH: '/src', PYTHONSAFEPATH: '1' });
    });

    it("gives `python -m cuda_llm_lsp` PYTHONSAFEPATH, a user's full command not", () => {
        const base = { PATH: '/bin', PYTHONPATH: '/src' };
        assert.deepEqual(serverEnv(launch, base), { ...base, PYTHONUNBUFFERED: '1', PYTHONSAFEPATH: '1' });
        const command = { command: '/opt/wrapper.sh', args: [], env: { CUDA_LLM_EVALUATOR: 'recorded:/r.json' } };
        assert.deepEqual(serverEnv(command, base), { ...base, PYTHONUNBUFFERED: '1', CUDA_LLM_EVALUATOR: 'recorded:/r.json' });
    });

    it('imports the package with the configured interpreter', async () => {
        const calls: Array<[string, readonly string[]]> = [];
        const outcome = await checkServerInstalled(launch, fakeRunner({ code: 0, stderr: '', timedOut: false }, calls), { cwd: NEUTRAL });
        assert.deepEqual(outcome, { ok: true });
        assert.deepEqual(calls, [['/venv/bin/python', ['-c', 'import cuda_llm_lsp']]]);
    });

    it('says how to install when the module is missing', async () => {
        const stderr = "Traceback (most recent call last):\n  File \"<string>\", line 1\nModuleNotFoundError: No module named 'cuda_llm_lsp'\n";
        const outcome = await checkServerInstalled(launch, fakeRunner({ code: 1, stderr, timedOut: false }), { cwd: NEUTRAL });
        assert.equal(outcome.ok, false);
        assert.equal(
            outcome.message,
            'cuda-llm-lsp is not installed for /venv/bin/python. Run CUDA-LLM: Install/Update Server to install it into a ' +
                'private environment of the extension (or set cudaLlm.server.python to an interpreter where cuda-llm-lsp is installed).',
        );
        assert.doesNotMatch(outcome.message ?? '', /pip install/);
        assert.equal(outcome.message, notInstalledMessage('/venv/bin/python'));
        assert.match(outcome.detail ?? '', /No module named/);
    });

    it('tells a broken install from a missing one', async () => {
        const stderr = "Traceback...\nImportError: libnvrtc.so.13: cannot open shared object file\n";
        const outcome = await checkServerInstalled(launch, fakeRunner({ code: 1, stderr, timedOut: false }), { cwd: NEUTRAL });
        assert.equal(outcome.ok, false);
        assert.match(outcome.message ?? '', /fails to import in \/venv\/bin\/python \(ImportError: libnvrtc/);
    });

    it('says the interpreter is missing when it cannot be started', async () => {
        const outcome = await checkServerInstalled(launch, fakeRunner({ code: null, errorCode: 'ENOENT', stderr: 'spawn ENOENT', timedOut: false }), { cwd: NEUTRAL });
        assert.equal(outcome.ok, false);
        assert.match(outcome.message ?? '', /Python interpreter `\/venv\/bin\/python` was not found/);
    });

    it('lets a slow import through rather than blocking the server', async () => {
        const outcome = await checkServerInstalled(launch, fakeRunner({ code: null, stderr: '', timedOut: true }), { cwd: NEUTRAL });
        assert.equal(outcome.ok, true);
        assert.match(outcome.detail ?? '', /took too long/);
    });

    it('does not check a full command', async () => {
        const calls: Array<[string, readonly string[]]> = [];
        const outcome = await checkServerInstalled({ command: 'cuda-llm-lsp', args: [] }, fakeRunner({ code: 1, stderr: '', timedOut: false }, calls), { cwd: NEUTRAL });
        assert.deepEqual(outcome, { ok: true });
        assert.deepEqual(calls, []);
    });
});

describe('process runner', () => {
    it('reports the exit code and stderr of a real process', async () => {
        const r = await runProcess(process.execPath, ['-e', 'process.stderr.write("boom"); process.exit(3)'], { timeoutMs: 10_000 });
        assert.equal(r.code, 3);
        assert.equal(r.stderr, 'boom');
        assert.equal(r.timedOut, false);
    });

    it('reports ENOENT for a program that does not exist', async () => {
        const r = await runProcess(path.join(os.tmpdir(), 'no-such-python-7f3a'), ['-c', 'pass'], { timeoutMs: 10_000 });
        assert.equal(r.code, null);
        assert.equal(r.errorCode, 'ENOENT');
    });

    it('kills a process that runs past the timeout', async () => {
        const started = Date.now();
        const r = await runProcess(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { timeoutMs: 300 });
        assert.equal(r.timedOut, true);
        assert.ok(Date.now() - started < 10_000);
    });

    it('runs the import check end to end against a real interpreter stand-in', { skip: process.platform === 'win32' && 'needs a POSIX shell script' }, async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-python-'));
        const python = path.join(dir, 'python');
        fs.writeFileSync(python, '#!/bin/sh\necho "ModuleNotFoundError: No module named \'cuda_llm_lsp\'" >&2\nexit 1\n', { mode: 0o755 });
        try {
            const outcome = await checkServerInstalled({ command: python, args: ['-m', 'cuda_llm_lsp'], python }, undefined, { cwd: dir });
            assert.equal(outcome.message, notInstalledMessage(python));
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});
