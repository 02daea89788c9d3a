import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { TRUSTED_ONLY, untrustedRefusal } from '../../src/common/commands';
import {
    INSTALLED_MARKER,
    InstallIo,
    Inspected,
    Step,
    StepResult,
    installServer,
    installSteps,
    launchReader,
    machineValue,
    managedPython,
    runStep,
    shippedWheel,
    userChoseServer,
    venvPaths,
} from '../../src/common/managedServer';
import { MACHINE_KEYS, RESTRICTED_KEYS, changeKind, serverSettings } from '../../src/common/settings';
import { reader } from './helpers';

/** A `cudaLlm` section with user (global) and workspace values, as `inspect` reports them. */
function layered(global: Record<string, unknown>, workspace: Record<string, unknown>, defaults: Record<string, unknown> = {}) {
    return {
        get: <T>(key: string) => (workspace[key] ?? global[key] ?? defaults[key]) as T | undefined,
        inspect: <T>(key: string): Inspected<T> => ({
            defaultValue: defaults[key] as T,
            globalValue: global[key] as T,
            workspaceValue: workspace[key] as T,
        }),
    };
}

describe('settings a workspace cannot set', () => {
    const evil = { 'server.python': '/tmp/evil/python', 'server.command': ['/tmp/evil.sh'], 'server.evaluator': 'recorded:/x.json' };

    it('reads server.python and server.command from user settings only', () => {
        const config = layered({ 'server.python': '/home/u/py' }, evil, { 'server.command': [] });
        const launch = launchReader(config, MACHINE_KEYS);
        assert.equal(launch.get('server.python'), '/home/u/py');
        assert.deepEqual(launch.get('server.command'), []);
        assert.equal(launch.get('server.evaluator'), 'recorded:/x.json'); // trusted: the workspace's
        assert.equal(machineValue(layered({}, evil, { 'server.python': '' }), 'server.python'), '');
    });

    it('in Restricted Mode ignores the workspace evaluator too', () => {
        const launch = launchReader(layered({}, evil), RESTRICTED_KEYS);
        assert.equal(launch.get('server.evaluator'), undefined);
        assert.equal(launch.get('server.command'), undefined);
    });

    it('counts only a user-chosen interpreter or command as a choice', () => {
        assert.equal(userChoseServer(reader({ 'server.python': '', 'server.command': [] })), false);
        assert.equal(userChoseServer(reader({ 'server.python': '  ' })), false);
        assert.equal(userChoseServer(reader({ 'server.python': 'python3' })), true);
        assert.equal(userChoseServer(reader({ 'server.command': ['x'] })), true);
        assert.equal(userChoseServer(launchReader(layered({}, evil), MACHINE_KEYS)), false);
    });

    it('refuses Benchmark, Optimize and Profile in Restricted Mode only', () => {
        assert.deepEqual(TRUSTED_ONLY, ['cudaLlm.optimize', 'cudaLlm.benchmark', 'cudaLlm.profile']);
        assert.match(untrustedRefusal('cudaLlm.optimize', false) ?? '', /^Optimize runs this workspace's code .* Restricted Mode/);
        assert.match(untrustedRefusal('cudaLlm.benchmark', false) ?? '', /^Benchmark /);
        assert.match(untrustedRefusal('cudaLlm.profile', false) ?? '', /^Profile runs this workspace's code/);
        assert.equal(untrustedRefusal('cudaLlm.optimize', true), undefined);
        assert.equal(untrustedRefusal('cudaLlm.accept', false), undefined);
    });

    it('forwards the compile timeout, GPUs and cluster settings to the server', () => {
        const s = serverSettings(reader({ compileTimeoutS: 30.7, gpus: ' 0,2 ', cluster: 'ray://h:10001', strategy: 'plan' }));
        assert.deepEqual(s, { compileTimeoutS: 30, gpus: '0,2', cluster: 'ray://h:10001', strategy: 'plan', persistentPch: true });
        assert.equal(changeKind((k) => k === 'cudaLlm.compileTimeoutS'), 'forward');
        assert.equal(changeKind((k) => k === 'cudaLlm.gpus'), 'forward');
    });
});

describe('the shipped wheel and the managed venv', () => {
    it('finds the newest shipped wheel', () => {
        const list = () => ['README', 'cuda_llm_lsp-0.1.0-py3-none-any.whl', 'cuda_llm_lsp-0.2.0-py3-none-any.whl', 'other-1.0-py3-none-any.whl'];
        assert.equal(shippedWheel('/ext', list), path.join('/ext', 'server', 'cuda_llm_lsp-0.2.0-py3-none-any.whl'));
        assert.equal(shippedWheel('/ext', () => []), undefined);
    });

    it('uses the venv only after a completed install', () => {
        const { dir, python } = venvPaths('/g', 'linux');
        assert.equal(python, '/g/server-venv/bin/python');
        assert.equal(venvPaths('/g', 'win32').python, path.join('/g', 'server-venv', 'Scripts', 'python.exe'));
        assert.equal(managedPython('/g', (p) => p === python), undefined);
        assert.equal(managedPython('/g', (p) => p === python || p === path.join(dir, INSTALLED_MARKER)), python);
    });
});

/** The install's file system and processes, scripted: which steps ran, what was left. */
function scriptedIo(answers: (step: Step) => StepResult, files = new Set<string>()) {
    const ran: Step[] = [];
    const reports: string[] = [];
    const logged: string[] = [];
    const made: string[] = [];
    const io: InstallIo = {
        run: async (step, onLine) => {
            ran.push(step);
            onLine(`output of ${step.title}`);
            const r = answers(step);
            if (r.code === 0 && step.args.includes('venv')) {
                files.add(step.args[step.args.length - 1]);
                files.add(path.join(step.args[step.args.length - 1], 'bin', 'python'));
            }
            return r;
        },
        exists: (p) => files.has(p),
        mkdir: (p) => made.push(p),
        remove: (p) => [...files].filter((f) => f === p || f.startsWith(`${p}/`)).forEach((f) => files.delete(f)),
        write: (p) => files.add(p),
        log: (line) => logged.push(line),
        report: (message) => reports.push(message),
    };
    return { io, ran, reports, logged, files, made };
}

const OK: StepResult = { code: 0, tail: '' };
const WHEEL = '/ext/server/cuda_llm_lsp-0.1.0-py3-none-any.whl';

describe('CUDA-LLM: Install/Update Server', () => {
    it('checks Python, creates the venv, installs the wheel with its dependencies, then checks the import', async () => {
        const s = scriptedIo(() => OK);
        const outcome = await installServer('/g', WHEEL, s.io, new AbortController().signal);
        assert.deepEqual(outcome, { ok: true, python: '/g/server-venv/bin/python' });
        // Never in a workspace folder (or wherever the extension host runs): Python would import a
        // repository's `venv.py` or `pip.py` from the current directory.
        assert.deepEqual(s.made, ['/g/process-cwd']);
        for (const step of s.ran) {
            assert.equal(step.cwd, '/g/process-cwd', step.title);
            assert.deepEqual(step.env, { PIP_NO_INPUT: '1', PYTHONSAFEPATH: '1' }, step.title);
        }
        assert.deepEqual(
            s.ran.map((step) => [step.command, ...step.args.filter((a) => !a.includes('\n'))]),
            [
                ['python3', '-c'],
                ['python3', '-m', 'venv', '/g/server-venv'],
                ['/g/server-venv/bin/python', '-m', 'pip', 'install', '--disable-pip-version-check', '--upgrade', WHEEL],
                ['/g/server-venv/bin/python', '-m', 'pip', 'install', '--disable-pip-version-check', '--force-reinstall', '--no-deps', WHEEL],
                ['/g/server-venv/bin/python', '-c', 'import cuda_llm_lsp'],
            ],
        );
        assert.equal(s.reports.length, 5);
        assert.match(s.reports[2], /installing the server and its dependencies .*\(3\/5\)/);
        assert.ok(s.logged.includes('output of creating the environment'));
        assert.ok(s.files.has(path.join('/g/server-venv', INSTALLED_MARKER)));
    });

    it('an update keeps the venv (and its downloaded dependencies)', async () => {
        const files = new Set(['/g/server-venv', '/g/server-venv/bin/python', path.join('/g/server-venv', INSTALLED_MARKER)]);
        const s = scriptedIo(() => OK, files);
        assert.ok((await installServer('/g', WHEEL, s.io, new AbortController().signal)).ok);
        assert.equal(s.ran.length, 3);
        assert.ok(!s.ran.some((step) => step.args.includes('venv')));
    });

    it('says how to get Python or venv when they are missing, and leaves no half-made venv', async () => {
        const missing = scriptedIo(() => ({ code: null, errorCode: 'ENOENT', tail: 'spawn python3 ENOENT' }));
        const r1 = await installServer('/g', WHEEL, missing.io, new AbortController().signal);
        assert.ok(!r1.ok);
        assert.match(r1.message, /`python3` was not found: install Python 3.10 or newer \(Debian\/Ubuntu: `sudo apt install python3 python3-venv`\)/);

        const old = scriptedIo(() => ({ code: 3, tail: '' }));
        const r2 = await installServer('/g', WHEEL, old.io, new AbortController().signal);
        assert.ok(!r2.ok && /older than Python 3.10/.test(r2.message));

        const noVenv = scriptedIo(() => ({ code: 1, tail: "ModuleNotFoundError: No module named 'ensurepip'" }));
        const r3 = await installServer('/g', WHEEL, noVenv.io, new AbortController().signal);
        assert.ok(!r3.ok && /sudo apt install python3-venv/.test(r3.message), !r3.ok ? r3.message : '');

        // Debian: venv starts, then ensurepip fails; the venv without pip is removed.
        const debian = scriptedIo((step) =>
            step.args.includes('venv') ? { code: 1, tail: 'The virtual environment was not created successfully because ensurepip is not\navailable. apt install python3.11-venv' } : OK,
        );
        debian.files.add('/g/server-venv');
        debian.files.add('/g/server-venv/bin/python');
        const r4 = await installServer('/g', WHEEL, debian.io, new AbortController().signal);
        assert.ok(!r4.ok && /`python3 -m venv` failed \(Debian\/Ubuntu: `sudo apt install python3-venv`\)/.test(r4.message));
        assert.deepEqual([...debian.files], []);
    });

    it("names the failing pip step with pip's last line, and keeps a good install on a failed update", async () => {
        const files = new Set(['/g/server-venv', '/g/server-venv/bin/python', path.join('/g/server-venv', INSTALLED_MARKER)]);
        const s = scriptedIo((step) => (step.args.includes('--upgrade') ? { code: 1, tail: 'Collecting pygls\nERROR: No matching distribution found for pygls<3,>=2.0' } : OK), files);
        const r = await installServer('/g', WHEEL, s.io, new AbortController().signal);
        assert.ok(!r.ok);
        assert.match(r.message, /failed at step 1 \(installing the server and its dependencies.*\): ERROR: No matching distribution found for pygls/);
        assert.match(r.message, /PIP_INDEX_URL/);
        assert.ok(s.files.has('/g/server-venv/bin/python'));
    });

    it('stops when cancelled and removes what a first install made', async () => {
        const abort = new AbortController();
        const s = scriptedIo((step) => {
            if (step.args.includes('--upgrade')) {
                abort.abort();
                return { code: null, tail: '', cancelled: true };
            }
            return OK;
        });
        const r = await installServer('/g', WHEEL, s.io, abort.signal);
        assert.deepEqual(r, { ok: false, cancelled: true, message: 'the server install was cancelled' });
        assert.deepEqual([...s.files], []);
    });

    it('without a shipped wheel says how to get one', async () => {
        const s = scriptedIo(() => OK);
        const r = await installServer('/g', undefined, s.io, new AbortController().signal);
        assert.ok(!r.ok && /ships no server wheel/.test(r.message));
        assert.equal(s.ran.length, 0);
    });

    it('runs a real step, its output line by line, and can be cancelled', async () => {
        const lines: string[] = [];
        const r = await runStep({ title: 't', cwd: os.tmpdir(), env: {}, command: process.execPath, args: ['-e', 'console.log("a\\nb"); console.error("c"); process.exit(2)'] }, (l) => lines.push(l), new AbortController().signal);
        assert.equal(r.code, 2);
        assert.deepEqual(lines.sort(), ['a', 'b', 'c']);
        const abort = new AbortController();
        const started = Date.now();
        const pending = runStep({ title: 't', cwd: os.tmpdir(), env: {}, command: process.execPath, args: ['-e', 'setTimeout(() => {}, 60000)'] }, () => undefined, abort.signal);
        setTimeout(() => abort.abort(), 200);
        const cancelled = await pending;
        assert.equal(cancelled.cancelled, true);
        assert.ok(Date.now() - started < 10_000);
        const missing = await runStep({ title: 't', cwd: os.tmpdir(), env: {}, command: path.join(os.tmpdir(), 'no-such-python-9c1e'), args: [] }, () => undefined, new AbortController().signal);
        assert.equal(missing.errorCode, 'ENOENT');
    });

    it('the Python check is a real probe: it passes on this machine\'s python3 when it has venv', { skip: !fs.existsSync('/usr/bin/python3') && 'no /usr/bin/python3' }, async () => {
        const [check] = installSteps('/usr/bin/python3', venvPaths('/g'), WHEEL, false, os.tmpdir());
        const r = await runStep(check, () => undefined, new AbortController().signal);
        assert.ok(r.code === 0 || /ensurepip|venv/.test(r.tail), r.tail);
    });
});
