/**
 * The bundled extension against the real Python server (`python -m cuda_llm_lsp`), when this
 * checkout has one: the interpreter from CUDA_LLM_PYTHON, else the repository's `.venv`. Checks
 * the contract between the two sides: launch through `cudaLlm.server.python`, the server's
 * commands, settings and key accepted without complaint, and a job's work-done progress reaching
 * the status bar. Skipped, with the reason, where no such interpreter exists.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { Uri, fake, makeContext, makeDocument, workspace } from './fakeVscode';
import { ExtensionModule, REPO, findPython, liveChildren, loadBundle, resetSettings, until } from './helpers';

const KEY = 'sk-real-ABCDEFGHIJKLMNOPQRSTUVWX';

const found = findPython('import cuda_llm_lsp.lsp.app', 'cuda_llm_lsp');
const SAXPY = path.join(REPO, 'examples', 'saxpy.cu');

describe('the bundled extension with the real server', { skip: found.reason ?? (!fs.existsSync(SAXPY) && 'examples/saxpy.cu is missing'), timeout: 180_000 }, () => {
    let ext: ExtensionModule;
    let context: any;
    const uri = pathToFileURL(SAXPY).toString();
    // A cloned repository as the workspace, with modules Python would import from its folder.
    const planted = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-planted-'));
    const mark = path.join(planted, 'imported');
    const home = process.cwd();
    let folders: unknown;

    before(async () => {
        for (const name of ['cuda_llm_lsp', 'argparse', 'logging']) {
            fs.writeFileSync(path.join(planted, `${name}.py`), `open(${JSON.stringify(mark)}, 'a').write('${name}\\n')\n`);
        }
        folders = (workspace as any).workspaceFolders;
        (workspace as any).workspaceFolders = [{ uri: Uri.file(planted), name: 'planted', index: 0 }];
        process.chdir(planted);
        ext = loadBundle();
        fake.reset();
        resetSettings();
        fake.settings.set('cudaLlm.server.python', found.python);
        fake.settings.set('cudaLlm.model', 'test-model');
        fake.settings.set('cudaLlm.baseUrl', 'http://127.0.0.1:9/v1');
        fake.secrets.set('cudaLlm.apiKey', KEY);
        fake.documents.push(makeDocument(uri, 'cuda-cpp', fs.readFileSync(SAXPY, 'utf8')));
        context = makeContext();
        await ext.activate(context);
    });

    after(async () => {
        await ext.deactivate();
        context.subscriptions.forEach((d: { dispose(): unknown }) => d.dispose());
        assert.deepEqual(liveChildren(), [], 'no server process outlives deactivate');
        process.chdir(home);
        (workspace as any).workspaceFolders = folders;
        fs.rmSync(planted, { recursive: true, force: true });
    });

    it('starts python -m cuda_llm_lsp and gets the server commands of the contract', async () => {
        await until('running', () => fake.statusBar.text === '$(zap) CUDA-LLM');
        for (const id of ['cudaLlm.optimize', 'cudaLlm.benchmark', 'cudaLlm.accept', 'cudaLlm.reject', 'cudaLlm.cancel', 'cudaLlm.showSuggestion', 'cudaLlm.addSpec']) {
            await until(id, () => fake.commands.has(id));
        }
        assert.ok(!fs.existsSync(mark), `the workspace's modules were imported: ${fs.existsSync(mark) ? fs.readFileSync(mark, 'utf8') : ''}`);
    });

    it('has its settings and key accepted without a complaint', async () => {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        // Other warnings (no GPU on this machine) are the server's business; settings ones are ours.
        const complaints = fake.messages.filter((m) => m.level !== 'info' && /cudaLlm|setting|apiKey|initializationOptions/i.test(m.text));
        assert.deepEqual(complaints, []);
        assert.ok(!fake.output.includes(KEY));
    });

    it('shows a job of the server in the status bar from its work-done progress, until it ends', async () => {
        await fake.commands.get('cudaLlm.client.benchmarkKernel')!({ uri, kernel: 'saxpy' });
        await until('busy status', () => fake.statusHistory.some((t) => t.includes('1 benchmarking')));
        const progress = await until('progress', () => fake.progress.find((p) => p.title === 'Benchmarking saxpy'));
        assert.equal(progress.cancellable, true);
        await until('progress end', () => progress.done, 120_000);
        await until('idle status', () => fake.statusBar.text === '$(zap) CUDA-LLM');
    });

    it('cancels all jobs with cudaLlm.cancel and no argument', async () => {
        fake.messages = [];
        await until('idle status', () => fake.statusBar.text === '$(zap) CUDA-LLM');
        // No job known to the client: Cancel Optimizations sends `cudaLlm.cancel` with no argument.
        await fake.commands.get('cudaLlm.client.cancelAll')!();
        // The server's answer: `false`, nothing was running; a second one proves it is still fine.
        assert.equal(await fake.commands.get('cudaLlm.cancel')!(), false);
        await new Promise((resolve) => setTimeout(resolve, 1000));
        assert.deepEqual(fake.messages.filter((m) => m.level !== 'info'), []);
        assert.doesNotMatch(fake.output, /commands take one argument|Traceback/);
    });

    it('shows the kernel summary when the resources lens is clicked', async () => {
        fake.messages = [];
        assert.equal(await fake.commands.get('cudaLlm.showResources')!({ uri, kernel: 'saxpy' }), true);
        const said = await until('summary', () => fake.messages.find((m) => m.text.startsWith('cuda-llm: saxpy · ')));
        assert.match(said.text, / regs · .*Test spec: /);
    });
});
