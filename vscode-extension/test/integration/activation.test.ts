/**
 * The bundled extension (dist/extension.js) activated in node against a fake `vscode` module and a
 * scripted language server over real stdio JSON-RPC: commands registered, settings and key
 * forwarded, progress shown and cancellable, the suggestion's diff and Accept, secrets redacted,
 * and the "not installed" message.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { notInstalledMessage } from '../../src/common/serverCommand';
import { RecordedProgress, Uri, fake, makeContext, makeDocument, workspace } from './fakeVscode';
import { ExtensionModule, ROOT, loadBundle, offerOf, resetSettings, until } from './helpers';

const BUNDLE = path.join(ROOT, 'dist', 'extension.js');
const MANIFEST = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const KEY = 'sk-test-ABCDEFGHIJKLMNOPQRSTUVWX';
const NEW_KEY = 'sk-next-ZYXWVUTSRQPONMLKJIHGFEDC';
const DOC = 'file:///work/saxpy.cu';

function serverLog(logFile: string): any[] {
    return fs.existsSync(logFile)
        ? fs
              .readFileSync(logFile, 'utf8')
              .split('\n')
              .filter((l) => l !== '')
              .map((l) => JSON.parse(l))
        : [];
}

function executedOnServer(logFile: string, command: string): any[] {
    return serverLog(logFile).filter((m) => m.method === 'workspace/executeCommand' && m.params.command === command);
}

describe('the bundled extension', { timeout: 120_000 }, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-ext-'));
    const logFile = path.join(dir, 'server.jsonl');
    let ext: ExtensionModule;
    let context: any;

    before(async () => {
        assert.ok(fs.existsSync(BUNDLE), 'dist/extension.js exists (npm run compile)');
        ext = loadBundle();
        assert.equal(typeof ext.activate, 'function');
        assert.equal(typeof ext.deactivate, 'function');
        fake.reset();
        resetSettings();
        fake.settings.set('cudaLlm.server.command', [process.execPath, path.join(__dirname, 'fakeServer.js'), logFile]);
        fake.settings.set('cudaLlm.model', 'test-model');
        fake.settings.set('cudaLlm.includePaths', ['include']);
        fake.settings.set('cudaLlm.trace.server', 'verbose');
        fake.secrets.set('cudaLlm.apiKey', KEY);
        context = makeContext();
        await ext.activate(context);
    });

    after(async () => {
        await ext.deactivate();
        context.subscriptions.forEach((d: { dispose(): unknown }) => d.dispose());
        fs.rmSync(dir, { recursive: true, force: true });
    });

    it('activates on cuda-cpp and registers every contributed command', async () => {
        assert.deepEqual(MANIFEST.activationEvents, ['onLanguage:cuda-cpp']);
        assert.equal(MANIFEST.main, './dist/extension.js');
        for (const { command } of MANIFEST.contributes.commands) {
            assert.ok(fake.commands.has(command), `${command} is registered`);
        }
        for (const id of ['cudaLlm.optimize', 'cudaLlm.accept', 'cudaLlm.reject', 'cudaLlm.cancel']) {
            assert.ok(fake.commands.has(id), `the server's ${id} is registered by the client library`);
        }
        assert.equal(fake.statusBar.text, '$(zap) CUDA-LLM');
    });

    it('passes settings and the API key in initializationOptions and workspace/configuration', async () => {
        const init = await until('initialize', () => serverLog(logFile).find((m) => m.method === 'initialize'));
        assert.deepEqual(serverLog(logFile)[0].argv, [logFile], 'the server gets exactly the configured command line');
        assert.equal(init.params.initializationOptions.cudaLlm.model, 'test-model');
        assert.deepEqual(init.params.initializationOptions.cudaLlm.includePaths, ['include']);
        assert.equal(init.params.initializationOptions.cudaLlm.rounds, 4);
        assert.equal(init.params.initializationOptions.cudaLlm.apiKey, KEY);
        assert.equal(init.params.initializationOptions.apiKey, KEY);
        assert.ok(!('server' in init.params.initializationOptions.cudaLlm));
        assert.equal(init.params.capabilities.experimental.cudaLlm.suggestionNotification, true);
        const answer = await until('configuration answer', () => serverLog(logFile).find((m) => m.configurationAnswer));
        assert.equal(answer.configurationAnswer[0].model, 'test-model');
        assert.ok(!('apiKey' in answer.configurationAnswer[0]), 'the key travels only in initializationOptions');
        assert.ok(!('server' in answer.configurationAnswer[0]));
        assert.equal(answer.configurationAnswer[1], 'test-model');
    });

    it('shows an optimization as a cancellable notification and in the status bar, then the diff, focused, with a notification of its figures', async () => {
        fake.messages = [];
        await fake.commands.get('cudaLlm.client.optimizeKernel')!({ uri: DOC, kernel: 'saxpy' });
        const progress = await until('progress', () => fake.progress.find((p) => p.title === 'Optimizing saxpy'));
        assert.equal(progress.cancellable, true);
        await until('progress end', () => progress.done);
        assert.ok(progress.reports.some((r) => r.message === 'round 1/4: best 1.80×'));
        assert.ok(fake.statusHistory.includes('$(sync~spin) CUDA-LLM: 1 optimizing · best 1.80×'), fake.statusHistory.join('\n'));

        const offer = await until('the diff and its notification', () => offerOf('cuda-llm: saxpy'));
        assert.equal(String(offer.diff.args[0]), 'cuda-llm-suggestion:/1/saxpy.original.cu');
        assert.equal(String(offer.diff.args[1]), 'cuda-llm-suggestion:/1/saxpy.suggested.cu');
        assert.equal(offer.diff.args[2], 'saxpy: original ↔ suggested (2.10× faster, 4/4 cases)');
        assert.equal((offer.diff.args[3] as { preserveFocus: boolean }).preserveFocus, false, 'focused: ✓ and ✗ show at once');
        assert.match(offer.original ?? '', /slow/);
        assert.match(offer.suggested ?? '', /faster/);
        // Once, in one format; the server's note goes to the output.
        assert.equal(offer.notice.title, 'cuda-llm: saxpy 2.10× faster (420 µs → 200 µs), 4/4 cases');
        assert.equal(offer.notice.cancellable, false);
        assert.equal(offer.notice.done, false, 'the notification stays while the suggestion is pending');
        assert.deepEqual(fake.messages.filter((m) => m.text.includes('faster')), [], 'no second notification');
        assert.match(fake.output, /Suggestion for saxpy in file:\/\/\/work\/saxpy\.cu: saxpy 2\.10× faster \(420 µs → 200 µs\), 4\/4 cases; vectorised loads/);
        await until('idle status', () => fake.statusBar.text === '$(zap) CUDA-LLM');
        assert.ok(fake.executed.some((e) => e.id === 'setContext' && e.args[0] === 'cudaLlm.suggestionPending' && e.args[1] === true));
    });

    it('refuses Accept of a kernel edited since the run, with the reason, and keeps the suggestion', async () => {
        const offer = offerOf('cuda-llm: saxpy')!;
        const edited = makeDocument(DOC, 'cuda-cpp', '__global__ void saxpy(int n, float a, const float* x, float* y) { /* slow, edited */ }');
        fake.documents.push(edited);
        fake.messages = [];
        try {
            await fake.commands.get('cudaLlm.client.acceptSuggestion')!(offer.diff.args[1]);
        } finally {
            fake.documents.splice(fake.documents.indexOf(edited), 1);
        }
        const warning = await until('warning', () => fake.messages.find((m) => m.level === 'warning'));
        assert.match(warning.text, /^cuda-llm: saxpy changed since the optimization started, so the suggestion was not applied/);
        assert.match(warning.text, /"CUDA-LLM: Show Suggestion Diff"/);
        assert.match(fake.output, /Accept of saxpy refused: saxpy changed since the optimization started/);
        assert.deepEqual(executedOnServer(logFile, 'cudaLlm.accept'), [], 'refused before the server is asked');
        assert.equal(offer.notice.done, false, 'the suggestion is still pending');
    });

    it('accepts with ✓ in the diff in one step (confirmed) and closes the notification', async () => {
        const offer = offerOf('cuda-llm: saxpy')!;
        await fake.commands.get('cudaLlm.client.acceptSuggestion')!(offer.diff.args[1]);
        const accepted = await until('accept', () => executedOnServer(logFile, 'cudaLlm.accept')[0]);
        assert.deepEqual(accepted.params.arguments, [{ uri: DOC, kernel: 'saxpy', confirmed: true }]);
        await until('the notification closes', () => offer.notice.done);
        assert.ok(fake.executed.some((e) => e.id === 'setContext' && e.args[0] === 'cudaLlm.suggestionPending' && e.args[1] === false));
    });

    it('shows and logs the reason the server gives for refusing Accept, and keeps the notification', async () => {
        fake.messages = [];
        await fake.commands.get('cudaLlm.client.optimizeKernel')!({ uri: DOC, kernel: 'stale' });
        const offer = await until('the stale suggestion', () => offerOf('cuda-llm: stale'));
        await fake.commands.get('cudaLlm.client.acceptSuggestion')!(offer.diff.args[1]);
        await until('logged', () => fake.output.includes('Accept of stale refused by the server: stale changed since the optimization started'));
        const shown = await until('the refusal', () => fake.messages.find((m) => m.text.includes('stale changed')));
        assert.equal(shown.level, 'warning');
        assert.equal(
            shown.text,
            'cuda-llm: stale changed since the optimization started, so the suggestion was not applied. See it again with "CUDA-LLM: Show Suggestion Diff", or optimize again.',
        );
        assert.equal(offer.notice.done, false);
        await fake.commands.get('cudaLlm.client.rejectSuggestion')!(offer.diff.args[1]);
        await until('the notification closes on Reject', () => offer.notice.done);
    });

    it('shows a server message too long for one line in full (with a button), and logs every server message', async () => {
        fake.messages = [];
        await fake.commands.get('cudaLlm.client.benchmarkKernel')!({ uri: DOC, kernel: 'saxpy' });
        const warning = await until('the no-GPU warning', () => fake.messages.find((m) => m.text.includes('no GPU')));
        assert.equal(warning.level, 'warning');
        assert.match(warning.text, /^cuda-llm: cannot benchmark saxpy: no GPU \(.*Ensure the NVIDIA display driver is installed\.\)$/);
        assert.deepEqual(warning.items, ['Show Output'], 'a notification with a button is shown expanded, not cut off');
        await until('logged', () => fake.output.includes('server warning: cuda-llm: cannot benchmark saxpy: no GPU'));
        await until('log messages logged', () => fake.output.includes('benchmark asked'));
        assert.ok(!fake.messages.some((m) => m.text.includes('benchmark asked')), 'logMessage is not shown');
    });

    it('cancels a job from its notification with window/workDoneProgress/cancel', async () => {
        await fake.commands.get('cudaLlm.client.optimizeKernel')!({ uri: DOC, kernel: 'gemm' });
        const progress: RecordedProgress = await until('progress', () => fake.progress.find((p) => p.title === 'Optimizing gemm'));
        progress.cancel();
        await until('cancel sent', () =>
            serverLog(logFile).find((m) => m.method === 'window/workDoneProgress/cancel' && m.params.token === 'job-gemm'),
        );
        await until('progress end', () => progress.done);
        await until('idle status', () => fake.statusBar.text === '$(zap) CUDA-LLM');
    });

    it('cancels every job when the status bar item is clicked', async () => {
        await fake.commands.get('cudaLlm.client.optimizeKernel')!({ uri: DOC, kernel: 'k2' });
        await fake.commands.get('cudaLlm.client.optimizeKernel')!({ uri: DOC, kernel: 'k3' });
        await until('busy status', () => fake.statusBar.text.includes('2 optimizing'));
        assert.equal(fake.statusBar.command, 'cudaLlm.client.cancelAll');
        await fake.commands.get(fake.statusBar.command as string)!();
        for (const token of ['job-k2', 'job-k3']) {
            await until(`cancel of ${token}`, () =>
                serverLog(logFile).find((m) => m.method === 'window/workDoneProgress/cancel' && m.params.token === token),
            );
        }
        await until('idle status', () => fake.statusBar.text === '$(zap) CUDA-LLM');
        assert.deepEqual(executedOnServer(logFile, 'cudaLlm.cancel'), [], 'no cancel-all needed when every job is known');
    });

    it('sends cudaLlm.cancel without an argument (cancel all) when it knows no job', async () => {
        await fake.commands.get('cudaLlm.client.cancelAll')!();
        const cancel = await until('cudaLlm.cancel', () => executedOnServer(logFile, 'cudaLlm.cancel')[0]);
        assert.deepEqual(cancel.params.arguments, []);
    });

    it('asks for the suggestion when an optimization started from a code lens ends with one but the server sent none', async () => {
        fake.answer = () => undefined;
        await fake.commands.get('cudaLlm.optimize')!({ uri: DOC, kernel: 'quiet' });
        const shown = await until('showSuggestion', () => executedOnServer(logFile, 'cudaLlm.showSuggestion')[0]);
        assert.deepEqual(shown.params.arguments, [{ uri: DOC, kernel: 'quiet' }]);
        const diff = await until('diff', () => fake.executed.find((e) => e.id === 'vscode.diff' && String(e.args[1]).endsWith('/quiet.suggested.cu')));
        assert.equal(diff.args[2], 'quiet: original ↔ suggested (2.10× faster, 4/4 cases)');
        assert.equal(executedOnServer(logFile, 'cudaLlm.showSuggestion').length, 1, 'saxpy announced its own suggestion');
    });

    it('rejects the pending suggestion shown in the active diff from the editor title button', async () => {
        const diff = fake.executed.find((e) => e.id === 'vscode.diff' && String(e.args[1]).endsWith('/quiet.suggested.cu'));
        assert.ok(diff);
        await fake.commands.get('cudaLlm.client.rejectSuggestion')!(diff.args[1]);
        const rejected = await until('reject', () => executedOnServer(logFile, 'cudaLlm.reject').find((m) => m.params.arguments[0].kernel === 'quiet'));
        assert.deepEqual(rejected.params.arguments, [{ uri: DOC, kernel: 'quiet' }]);
        await until('its notification closes', () => offerOf('cuda-llm: quiet')?.notice.done);
        fake.messages = [];
        await fake.commands.get('cudaLlm.client.rejectSuggestion')!(diff.args[1]);
        const refused = await until('error', () => fake.messages.find((m) => m.level === 'error'));
        assert.match(refused.text, /no pending suggestion/);
    });

    it('never writes the API key to the output, even with a verbose trace and a server that logs it', async () => {
        await until('server stderr in the output', () => fake.output.includes('fake server started'));
        await until('trace in the output', () => fake.output.includes("Sending request 'initialize"));
        assert.ok(!fake.output.includes(KEY), 'the key leaked into the output channel');
        assert.match(fake.output, /<redacted>/);
    });

    it('restarts the server with a new key from Set API Key, stored only in secret storage', async () => {
        fake.inputBoxAnswer = NEW_KEY;
        await fake.commands.get('cudaLlm.client.setApiKey')!();
        assert.equal(fake.secrets.get('cudaLlm.apiKey'), NEW_KEY);
        const inits = await until('second initialize', () => {
            const all = serverLog(logFile).filter((m) => m.method === 'initialize');
            return all.length >= 2 && all;
        });
        assert.equal(inits[1].params.initializationOptions.apiKey, NEW_KEY);
        assert.ok(![...fake.settings.values()].some((v) => JSON.stringify(v ?? null).includes(NEW_KEY)));
        await until('running again', () => fake.statusBar.text === '$(zap) CUDA-LLM');
        assert.ok(!fake.output.includes(NEW_KEY));
    });

    it('forwards a changed setting with didChangeConfiguration, never with the key', async () => {
        fake.settings.set('cudaLlm.model', 'changed-model');
        fake.configListeners.fire({ affectsConfiguration: (key) => key === 'cudaLlm' || key === 'cudaLlm.model' });
        const change = await until('didChangeConfiguration', () =>
            serverLog(logFile).find((m) => m.method === 'workspace/didChangeConfiguration'),
        );
        assert.equal(change.params.settings.cudaLlm.model, 'changed-model');
        assert.ok(!JSON.stringify(change).includes('apiKey'));
    });

    it('forgets the jobs of a server that crashed, and follows the library restarting it', async () => {
        await fake.commands.get('cudaLlm.client.optimizeKernel')!({ uri: DOC, kernel: 'k9' });
        const progress = await until('progress', () => fake.progress.find((p) => p.title === 'Optimizing k9'));
        const initsBefore = serverLog(logFile).filter((m) => m.method === 'initialize').length;
        fake.statusHistory = [];
        await Promise.resolve(fake.commands.get('cudaLlm.addSpec')!({ uri: DOC, kernel: 'crash' })).catch(() => undefined);
        await until('progress closed', () => progress.done);
        await until('restarted', () => serverLog(logFile).filter((m) => m.method === 'initialize').length > initsBefore);
        await until('running again', () => fake.statusBar.text === '$(zap) CUDA-LLM');
        assert.ok(fake.statusHistory.includes('$(loading~spin) CUDA-LLM'), `the restart shows: ${fake.statusHistory.join(' | ')}`);
        assert.ok(!fake.statusBar.text.includes('optimizing'));
    });
});

describe('the bundled extension without the server package', { timeout: 60_000 }, () => {
    it('says how to install cuda-llm-lsp for the configured Python', { skip: process.platform === 'win32' && 'POSIX shell' }, async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-nopkg-'));
        const python = path.join(dir, 'python3');
        fs.writeFileSync(python, '#!/bin/sh\necho "ModuleNotFoundError: No module named \'cuda_llm_lsp\'" >&2\nexit 1\n', { mode: 0o755 });
        const ext = loadBundle();
        fake.reset();
        resetSettings();
        fake.settings.set('cudaLlm.server.python', python);
        const context = makeContext();
        try {
            await ext.activate(context);
            const shown = await until('error message', () => fake.messages.find((m) => m.level === 'error'));
            assert.equal(shown.text, `cuda-llm: ${notInstalledMessage(python)}`);
            assert.deepEqual(shown.items, ['Install Server', 'Open Settings', 'Show Output']);
            assert.doesNotMatch(shown.text, /pip install/);
            assert.equal(fake.statusBar.text, '$(error) CUDA-LLM');
            fake.messages = [];
            await fake.commands.get('cudaLlm.client.optimizeKernel')!({ uri: DOC, kernel: 'saxpy' });
            const refused = await until('refusal', () => fake.messages.find((m) => m.level === 'error'));
            assert.match(refused.text, /the language server is not running: cuda-llm-lsp is not installed/);
        } finally {
            await ext.deactivate();
            context.subscriptions.forEach((d: { dispose(): unknown }) => d.dispose());
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

describe('the processes the bundled extension starts, in a workspace with planted Python modules', { timeout: 60_000 }, () => {
    // Issue 36: started in the first workspace folder, `python -m cuda_llm_lsp` and the install
    // check `python -c "import cuda_llm_lsp"` imported the repository's `argparse.py` /
    // `cuda_llm_lsp.py` (Python puts the current directory first on sys.path).
    it('runs the install check and the server in its own directory with PYTHONSAFEPATH, never the workspace', { skip: process.platform === 'win32' && 'POSIX shell' }, async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-planted-'));
        const repo = path.join(dir, 'repo');
        fs.mkdirSync(repo);
        for (const name of ['cuda_llm_lsp', 'argparse']) {
            fs.writeFileSync(path.join(repo, `${name}.py`), `open(${JSON.stringify(path.join(dir, 'imported'))}, 'a').write('${name}')\n`);
        }
        const calls = path.join(dir, 'calls.log');
        const logFile = path.join(dir, 'server.jsonl');
        // The interpreter: records where and how it runs, then imports (`-c`) or serves (`-m`).
        const python = path.join(dir, 'python');
        fs.writeFileSync(
            python,
            `#!/bin/sh\necho "$PWD|$PYTHONSAFEPATH|$*" >> ${calls}\nif [ "$1" = -m ]; then exec ${process.execPath} ${path.join(__dirname, 'fakeServer.js')} ${logFile}; fi\nexit 0\n`,
            { mode: 0o755 },
        );
        const ext = loadBundle();
        fake.reset();
        resetSettings();
        fake.settings.set('cudaLlm.server.python', python);
        const folders = (workspace as any).workspaceFolders;
        (workspace as any).workspaceFolders = [{ uri: Uri.file(repo), name: 'repo', index: 0 }];
        const home = process.cwd();
        process.chdir(repo); // an extension host started with `code .` in the repository
        const context = makeContext();
        const neutral = path.join(context.globalStorageUri.fsPath, 'process-cwd');
        try {
            await ext.activate(context);
            await until('running', () => fake.statusBar.text === '$(zap) CUDA-LLM');
            const ran = fs.readFileSync(calls, 'utf8').trim().split('\n');
            assert.deepEqual(ran, [`${neutral}|1|-c import cuda_llm_lsp`, `${neutral}|1|-m cuda_llm_lsp`]);
            const started = serverLog(logFile)[0];
            assert.equal(started.cwd, neutral);
            assert.equal(started.safePath, '1');
            assert.ok(!fs.existsSync(path.join(dir, 'imported')));
        } finally {
            process.chdir(home);
            (workspace as any).workspaceFolders = folders;
            await ext.deactivate();
            context.subscriptions.forEach((d: { dispose(): unknown }) => d.dispose());
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("starts a user's server.command in its own directory too", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-command-'));
        const logFile = path.join(dir, 'server.jsonl');
        const ext = loadBundle();
        fake.reset();
        resetSettings();
        fake.settings.set('cudaLlm.server.command', [process.execPath, path.join(__dirname, 'fakeServer.js'), logFile]);
        const folders = (workspace as any).workspaceFolders;
        (workspace as any).workspaceFolders = [{ uri: Uri.file(dir), name: 'repo', index: 0 }];
        const context = makeContext();
        try {
            await ext.activate(context);
            const started = await until('started', () => serverLog(logFile)[0]);
            assert.equal(started.cwd, path.join(context.globalStorageUri.fsPath, 'process-cwd'));
            assert.equal(started.safePath, null, 'a wrapper command keeps its own script directory');
        } finally {
            (workspace as any).workspaceFolders = folders;
            await ext.deactivate();
            context.subscriptions.forEach((d: { dispose(): unknown }) => d.dispose());
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

describe('CUDA-LLM: Install/Update Server in the bundled extension', { timeout: 60_000 }, () => {
    it('makes a venv with python3, installs the shipped wheel, and starts the server from it', { skip: process.platform === 'win32' && 'POSIX shell' }, async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-install-'));
        const calls = path.join(dir, 'calls.log');
        // python3 on PATH: a stand-in that records its arguments and makes `-m venv DIR` a venv
        // whose python records its arguments too (pip, the import check, the server).
        const bin = path.join(dir, 'bin');
        fs.mkdirSync(bin);
        const server = `${process.execPath} ${path.join(__dirname, 'fakeServer.js')} ${path.join(dir, 'server.jsonl')}`;
        const venvPython = `#!/bin/sh\necho "venv $*" >> ${calls}\necho "where $PWD $PYTHONSAFEPATH" >> ${calls}\nif [ "$2" = cuda_llm_lsp ]; then exec ${server}; fi\nexit 0\n`;
        fs.writeFileSync(
            path.join(bin, 'python3'),
            `#!/bin/sh\necho "python3 $1 $2" >> ${calls}\necho "where $PWD $PYTHONSAFEPATH" >> ${calls}\nif [ "$2" = "import cuda_llm_lsp" ]; then echo "ModuleNotFoundError: No module named 'cuda_llm_lsp'" >&2; exit 1; fi\nif [ "$2" = venv ]; then mkdir -p "$3/bin"; printf '%b' '${venvPython.replace(/\n/g, '\\n')}' > "$3/bin/python"; chmod +x "$3/bin/python"; fi\nexit 0\n`,
            { mode: 0o755 },
        );
        const extensionPath = path.join(dir, 'ext');
        fs.mkdirSync(path.join(extensionPath, 'server'), { recursive: true });
        const wheel = path.join(extensionPath, 'server', 'cuda_llm_lsp-0.1.0-py3-none-any.whl');
        fs.writeFileSync(wheel, 'not really a wheel');
        const savedPath = process.env.PATH;
        process.env.PATH = `${bin}${path.delimiter}${savedPath}`;
        const ext = loadBundle();
        fake.reset();
        resetSettings();
        // The user presses the button the "not installed" message offers.
        fake.answer = (_text, items) => (items.includes('Install Server') ? 'Install Server' : undefined);
        const context = makeContext();
        context.extensionPath = extensionPath;
        const storage = context.globalStorageUri.fsPath;
        try {
            await ext.activate(context);
            const offer = await until('the offer', () => fake.messages.find((m) => m.items.includes('Install Server')));
            assert.match(offer.text, /cuda-llm-lsp is not installed for python3\. Run CUDA-LLM: Install\/Update Server/);
            const done = await until('installed', () => fake.messages.find((m) => m !== offer && (/server is installed/.test(m.text) || m.level === 'error')));
            const progress = fake.progress.find((p) => p.title === 'cuda-llm: installing the language server');
            assert.ok(progress?.cancellable && progress.done, 'a cancellable progress notification, ended');
            assert.ok(progress.reports.some((r) => /creating the environment \(2\/5\)/.test(r.message ?? '')));
            const venvPy = path.join(storage, 'server-venv', 'bin', 'python');
            assert.match(fake.output, new RegExp(`Starting the language server: ${venvPy.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} -m cuda_llm_lsp`));
            const log = fs.readFileSync(calls, 'utf8');
            assert.match(log, /python3 -c import sys/);
            assert.match(log, new RegExp(`python3 -m venv`));
            assert.ok(log.includes(`venv -m pip install --disable-pip-version-check --upgrade ${wheel}`), log);
            assert.ok(log.includes(`venv -m pip install --disable-pip-version-check --force-reinstall --no-deps ${wheel}`), log);
            assert.ok(log.includes('venv -c import cuda_llm_lsp'), log);
            // Every Python of the install and the server: the extension's own directory, safe path.
            const where = log.split('\n').filter((l) => l.startsWith('where '));
            assert.ok(where.length >= 6, log);
            assert.deepEqual([...new Set(where)], [`where ${path.join(storage, 'process-cwd')} 1`]);
            assert.equal(fs.readFileSync(path.join(storage, 'server-venv', 'cuda-llm-installed-wheel'), 'utf8').trim(), path.basename(wheel));
            assert.equal(done.level, 'info', done.text);
            assert.match(done.text, /the language server is installed .* and running/);
            assert.equal(fake.statusBar.text, '$(zap) CUDA-LLM');
        } finally {
            process.env.PATH = savedPath;
            fake.answer = () => undefined;
            await ext.deactivate();
            context.subscriptions.forEach((d: { dispose(): unknown }) => d.dispose());
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

describe('the bundled extension and settings a workspace may not set', { timeout: 60_000 }, () => {
    it("never starts a server command or interpreter from the workspace's settings", { skip: process.platform === 'win32' && 'POSIX shell' }, async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-ws-'));
        const ran = path.join(dir, 'ran');
        const evil = path.join(dir, 'evil.sh');
        fs.writeFileSync(evil, `#!/bin/sh\ntouch ${ran}\nexit 1\n`, { mode: 0o755 });
        const logFile = path.join(dir, 'server.jsonl');
        const ext = loadBundle();
        fake.reset();
        resetSettings();
        fake.settings.set('cudaLlm.server.command', [process.execPath, path.join(__dirname, 'fakeServer.js'), logFile]);
        fake.workspaceSettings.set('cudaLlm.server.command', [evil]);
        fake.workspaceSettings.set('cudaLlm.server.python', evil);
        const context = makeContext();
        try {
            await ext.activate(context);
            await until('the server started from user settings', () => fake.statusBar.text === '$(zap) CUDA-LLM');
            assert.ok(!fs.existsSync(ran), 'the workspace program never ran');
            // Only a workspace value: the default (python3 / the managed venv), never the workspace's.
            fake.settings.set('cudaLlm.server.command', []);
            fake.configListeners.fire({ affectsConfiguration: (k: string) => k === 'cudaLlm.server.command' });
            await until('restarted', () => fake.output.includes('Restarting the language server'));
            await until('a start attempt', () => /Starting the language server: python3 -m cuda_llm_lsp/.test(fake.output));
            assert.ok(!fs.existsSync(ran), 'the workspace program never ran');
        } finally {
            await ext.deactivate();
            context.subscriptions.forEach((d: { dispose(): unknown }) => d.dispose());
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it('refuses Benchmark and Optimize in Restricted Mode, from the palette and from a code lens', async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-untrusted-'));
        const logFile = path.join(dir, 'server.jsonl');
        const ext = loadBundle();
        fake.reset();
        resetSettings();
        fake.trusted = false;
        fake.settings.set('cudaLlm.server.command', [process.execPath, path.join(__dirname, 'fakeServer.js'), logFile]);
        const context = makeContext();
        try {
            await ext.activate(context);
            await until('running', () => fake.statusBar.text === '$(zap) CUDA-LLM');
            await fake.commands.get('cudaLlm.client.benchmarkKernel')!({ uri: DOC, kernel: 'saxpy' });
            const palette = await until('refusal', () => fake.messages.find((m) => /Restricted Mode/.test(m.text)));
            assert.match(palette.text, /^cuda-llm: Benchmark runs this workspace's code on your GPU, so it is off in Restricted Mode/);
            fake.messages = [];
            // A code lens runs the server's command through the client library's registration.
            await fake.commands.get('cudaLlm.optimize')!({ uri: DOC, kernel: 'saxpy' });
            const lens = await until('refusal', () => fake.messages.find((m) => /Restricted Mode/.test(m.text)));
            assert.match(lens.text, /^cuda-llm: Optimize runs this workspace's code/);
            assert.deepEqual(executedOnServer(logFile, 'cudaLlm.optimize'), []);
            assert.deepEqual(executedOnServer(logFile, 'cudaLlm.benchmark'), []);
            // Trusted now: the same lens reaches the server.
            fake.trusted = true;
            await fake.commands.get('cudaLlm.benchmark')!({ uri: DOC, kernel: 'saxpy' });
            await until('benchmark on the server', () => executedOnServer(logFile, 'cudaLlm.benchmark').length === 1);
        } finally {
            await ext.deactivate();
            context.subscriptions.forEach((d: { dispose(): unknown }) => d.dispose());
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it("sends no workspace include path, NVRTC option, endpoint or cluster in Restricted Mode, and the workspace's trust", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-restricted-'));
        const logFile = path.join(dir, 'server.jsonl');
        const ext = loadBundle();
        fake.reset();
        resetSettings();
        fake.trusted = false;
        fake.settings.set('cudaLlm.server.command', [process.execPath, path.join(__dirname, 'fakeServer.js'), logFile]);
        fake.settings.set('cudaLlm.nvrtcFlags', ['--use_fast_math']);
        fake.workspaceSettings.set('cudaLlm.nvrtcFlags', ['--create-pch=/home/u/.bashrc']);
        fake.workspaceSettings.set('cudaLlm.includePaths', ['/home/u/.ssh']);
        fake.workspaceSettings.set('cudaLlm.baseUrl', 'https://attacker.example/v1');
        fake.workspaceSettings.set('cudaLlm.model', 'ws-model');
        fake.settings.set('cudaLlm.persistentPch', true);
        fake.workspaceSettings.set('cudaLlm.persistentPch', true);
        const context = makeContext();
        try {
            await ext.activate(context);
            const init = await until('initialize', () => serverLog(logFile).find((m) => m.method === 'initialize'));
            const options = init.params.initializationOptions;
            assert.equal(options.workspaceTrusted, false);
            assert.deepEqual(options.cudaLlm.nvrtcFlags, ['--use_fast_math'], "the user's own value");
            assert.deepEqual(options.cudaLlm.includePaths ?? [], []);
            assert.equal(options.cudaLlm.baseUrl, undefined);
            assert.equal(options.cudaLlm.model, 'ws-model', 'a harmless setting still comes from the workspace');
            assert.equal(options.cudaLlm.persistentPch, false, 'no PCH kept across sessions in Restricted Mode');
            const answer = await until('configuration answer', () => serverLog(logFile).find((m) => m.configurationAnswer));
            assert.ok(!JSON.stringify(answer).includes('create-pch') && !JSON.stringify(answer).includes('attacker'));
            assert.match(fake.output, /Restricted Mode: the workspace's cudaLlm\.includePaths, cudaLlm\.nvrtcFlags, cudaLlm\.baseUrl are ignored/);
            // Trust granted: the server is told, with the workspace's values.
            fake.trusted = true;
            fake.trustGranted.fire();
            const change = await until('settings with trust', () =>
                serverLog(logFile).find((m) => m.method === 'workspace/didChangeConfiguration' && m.params.settings.workspaceTrusted === true),
            );
            assert.deepEqual(change.params.settings.cudaLlm.nvrtcFlags, ['--create-pch=/home/u/.bashrc']);
            assert.equal(change.params.settings.cudaLlm.persistentPch, true);
        } finally {
            await ext.deactivate();
            context.subscriptions.forEach((d: { dispose(): unknown }) => d.dispose());
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    it('declares the restricted settings, machine scope, and trust-dependent menus in the manifest', () => {
        const props = MANIFEST.contributes.configuration.properties;
        assert.equal(props['cudaLlm.server.python'].scope, 'machine');
        assert.equal(props['cudaLlm.server.command'].scope, 'machine');
        assert.equal(props['cudaLlm.captureCommand'].scope, 'machine', 'the program: user settings only');
        assert.equal(props['cudaLlm.captureCwd'].scope, 'machine');
        const trust = MANIFEST.capabilities.untrustedWorkspaces;
        assert.equal(trust.supported, 'limited');
        assert.deepEqual(trust.restrictedConfigurations, [
            'cudaLlm.server.python',
            'cudaLlm.server.command',
            'cudaLlm.server.evaluator',
            'cudaLlm.includePaths',
            'cudaLlm.nvrtcFlags',
            'cudaLlm.baseUrl',
            'cudaLlm.cluster',
            'cudaLlm.compileCommandsDir',
            'cudaLlm.captureCommand',
            'cudaLlm.captureCwd',
            'cudaLlm.persistentPch',
        ]);
        assert.ok(trust.description.length > 20);
        const gated = MANIFEST.contributes.menus.commandPalette.filter((m: any) => /optimizeKernel|benchmarkKernel/.test(m.command));
        assert.equal(gated.length, 2);
        assert.ok(gated.every((m: any) => m.when.includes('isWorkspaceTrusted')));
        for (const key of ['cudaLlm.compileTimeoutS', 'cudaLlm.gpus', 'cudaLlm.cluster', 'cudaLlm.strategy']) {
            assert.ok(props[key], `${key} is declared`);
        }
        assert.deepEqual([props['cudaLlm.compileTimeoutS'].minimum, props['cudaLlm.compileTimeoutS'].maximum, props['cudaLlm.compileTimeoutS'].default], [1, 600, 10]);
        assert.ok(fs.existsSync(path.join(ROOT, MANIFEST.icon)), 'the icon exists');
    });
});

describe('the bundled extension with a server that hangs at shutdown', { timeout: 60_000 }, () => {
    it('kills the server when it answers neither shutdown nor exit nor SIGTERM', async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-ext-'));
        const logFile = path.join(dir, 'server.jsonl');
        try {
            const ext = loadBundle();
            fake.reset();
            resetSettings();
            fake.settings.set('cudaLlm.server.command', [process.execPath, path.join(__dirname, 'fakeServer.js'), logFile, '--stubborn']);
            const context = makeContext();
            await ext.activate(context);
            await until('running', () => fake.statusBar.text === '$(zap) CUDA-LLM');
            const pid = serverLog(logFile).find((m) => m.pid !== undefined)?.pid as number;
            assert.ok(pid > 0, 'the fake server logged its pid');
            const started = Date.now();
            await ext.deactivate();
            context.subscriptions.forEach((d: { dispose(): unknown }) => d.dispose());
            assert.throws(() => process.kill(pid, 0), /ESRCH/, 'the server process is gone');
            assert.ok(serverLog(logFile).some((m) => m.signal === 'SIGTERM'), 'asked with SIGTERM before SIGKILL');
            assert.ok(Date.now() - started < 20_000, `deactivate took ${Date.now() - started} ms`);
            assert.match(fake.output, /Stopping the language server: .*timed out/i);
        } finally {
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});
