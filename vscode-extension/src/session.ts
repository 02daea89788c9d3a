/**
 * One activation of the extension: owns the language client, the pending suggestions, the running
 * jobs and the UI that shows them, and wires the commands to them.
 *
 * State lives here and only here; the pure logic it applies is in `common/`, and every VS Code call
 * goes through `vscodeApi`.
 */

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { LanguageClient } from 'vscode-languageclient/node';
import { cancelProgress, createClient, executeServerCommand, onStateChange, sendConfiguration } from './client';
import { ServerProcesses } from './common/serverProcesses';
import {
    ClientCommand,
    KernelRef,
    ServerCommand,
    acceptArgs,
    acceptRefused,
    cancelAllArgs,
    endsWithSuggestion,
    isKernelRef,
    jobToken,
    kernelAt,
    kernelArgs,
    kernelsFromLenses,
    refusalReason,
    scanKernels,
    untrustedRefusal,
} from './common/commands';
import { Redactor, redactText } from './common/log';
import { MessageLevel, MessageView, SHOW_OUTPUT, messageView, serverMessageLevel } from './common/messages';
import {
    INSTALL_BUTTON,
    UPDATE_BUTTON,
    installServer,
    installedWheel,
    launchReader,
    managedPython,
    neutralDir,
    realIo,
    shippedWheel,
    userChoseServer,
} from './common/managedServer';
import { ServerLaunch, checkServerInstalled, resolveServerLaunch } from './common/serverCommand';
import {
    ConfigurationItemLike,
    MACHINE_KEYS,
    PathVariables,
    RESTRICTED_KEYS,
    SECTION,
    changeKind,
    configurationAnswer,
    didChangeConfigurationParams,
    ignoredWorkspaceSettings,
    initializationOptions,
} from './common/settings';
import { JobTracker, ProgressToken, ProgressValue, ServerState, statusView } from './common/status';
import {
    SUGGESTION_SCHEME,
    StoredSuggestion,
    SuggestionStore,
    diffTitle,
    figures,
    notificationText,
    parseSuggestion,
    parseSuggestionDocPath,
    refusalText,
    staleReason,
    suggestionDocUri,
    suggestionLogLine,
} from './common/suggestion';
import * as api from './vscodeApi';

export const API_KEY_SECRET = 'cudaLlm.apiKey';
export const SUGGESTION_CONTEXT_KEY = 'cudaLlm.suggestionPending';

interface ProgressUi {
    report(value: { message?: string; percentage?: number }): void;
    end(): void;
}

export class Session {
    private client: LanguageClient | undefined;
    /** Every server process started, so that none outlives a stop. */
    private readonly processes = new ServerProcesses();
    private stateListener: { dispose(): unknown } | undefined;
    private state: ServerState = { kind: 'stopped' };
    private apiKey: string | undefined;
    /** Start / stop / restart run one after the other, never interleaved. */
    private lifecycle: Promise<void> = Promise.resolve();
    private readonly redactor = new Redactor();
    private readonly output: api.OutputChannel;
    private readonly status: api.StatusBarItem;
    private readonly jobs = new JobTracker();
    private readonly progressUi = new Map<ProgressToken, ProgressUi>();
    private readonly suggestions = new SuggestionStore();
    /** Closes the notification of each pending suggestion, by its id in the store. */
    private readonly notices = new Map<number, () => void>();
    /** Optimizations started in this session, by progress token, until their progress ends. */
    private readonly optimizations = new Map<string, { ref: KernelRef; suggested: boolean }>();
    private readonly refreshDoc: (uri: string) => void;

    constructor(private readonly context: api.ExtensionContext) {
        this.output = api.redactingChannel(api.createOutputChannel('CUDA-LLM'), this.redactor);
        this.status = api.createStatusBarItem('cudaLlm.status', 'CUDA-LLM');
        const provider = api.registerContentProvider(
            SUGGESTION_SCHEME,
            (path) =>
                this.suggestions.content(path) ??
                '// This suggestion is no longer pending (accepted, rejected or replaced by a newer one).\n',
        );
        this.refreshDoc = provider.refresh;
        context.subscriptions.push(this.output, this.status, provider.disposable);
    }

    async activate(): Promise<void> {
        const c = ClientCommand;
        const commands: Array<[string, (...args: any[]) => unknown]> = [
            [c.restartServer, () => this.restart()],
            [c.setApiKey, () => this.setApiKey()],
            [c.clearApiKey, () => this.clearApiKey()],
            [c.optimizeKernel, (arg?: unknown) => this.runOnKernel(ServerCommand.optimize, arg)],
            [c.benchmarkKernel, (arg?: unknown) => this.runOnKernel(ServerCommand.benchmark, arg)],
            [c.profileKernel, (arg?: unknown) => this.runOnKernel(ServerCommand.profile, arg)],
            [c.acceptSuggestion, (arg?: unknown) => this.decide('accept', arg)],
            [c.rejectSuggestion, (arg?: unknown) => this.decide('reject', arg)],
            [c.showSuggestion, (arg?: unknown) => this.showPicked(arg)],
            [c.cancelAll, () => this.cancelAll()],
            [c.showOutput, () => this.output.show(true)],
            [c.installServer, () => this.installServer()],
            [c.tryDemo, () => this.tryDemo()],
        ];
        for (const [id, handler] of commands) {
            this.context.subscriptions.push(api.registerCommand(id, (...args: unknown[]) => this.guard(id, () => handler(...args))));
        }
        this.context.subscriptions.push(
            api.onDidChangeConfiguration((e) =>
                this.guard('settings change', () => this.onConfigurationChanged((key) => e.affectsConfiguration(key))),
            ),
            // Trust granted: workspace values of the restricted settings now apply.
            api.onDidGrantWorkspaceTrust(() =>
                this.guard('workspace trust', async () => {
                    await this.restartIfLaunchChanged();
                    await this.forwardSettings();
                }),
            ),
            this.context.secrets.onDidChange((e) =>
                this.guard('secret storage', async () => {
                    if (e.key === API_KEY_SECRET) {
                        this.setKey(await this.context.secrets.get(API_KEY_SECRET));
                    }
                }),
            ),
        );
        this.setKey(await this.context.secrets.get(API_KEY_SECRET));
        this.render();
        void api.setContext(SUGGESTION_CONTEXT_KEY, false);
        await this.start();
    }

    async dispose(): Promise<void> {
        await this.stop();
    }

    // ---- server lifecycle ----------------------------------------------------------------

    private serialized(step: () => Promise<void>): Promise<void> {
        this.lifecycle = this.lifecycle.then(step, step);
        return this.lifecycle;
    }

    start(): Promise<void> {
        return this.serialized(() => this.doStart());
    }

    stop(): Promise<void> {
        return this.serialized(() => this.doStop());
    }

    restart(): Promise<void> {
        return this.serialized(async () => {
            this.log('Restarting the language server');
            await this.doStop();
            await this.doStart();
        });
    }

    private vars(): PathVariables {
        return { workspaceFolder: api.firstWorkspaceFolder(), home: os.homedir() };
    }

    private config(scope?: string) {
        return api.getConfiguration(SECTION, scope);
    }

    /**
     * The settings that start the server: `server.python` / `server.command` from user (or
     * remote machine) settings only, and in Restricted Mode `server.evaluator` too.
     */
    private launchConfig() {
        return launchReader(this.config(), api.isWorkspaceTrusted() ? MACHINE_KEYS : RESTRICTED_KEYS);
    }

    private globalStorage(): string {
        return this.context.globalStorageUri.fsPath;
    }

    /** How the server would start now: the user's choice, else the extension's own venv, else python3. */
    private resolveLaunch() {
        const config = this.launchConfig();
        const managed = userChoseServer(config) ? undefined : managedPython(this.globalStorage());
        return resolveServerLaunch(config, this.vars(), managed);
    }

    private startedWith: string | undefined;

    private async restartIfLaunchChanged(): Promise<void> {
        const launch = this.resolveLaunch();
        if (JSON.stringify(launch) !== this.startedWith) {
            await this.restart();
        }
    }

    private async doStart(): Promise<void> {
        this.setState({ kind: 'starting' });
        const launch = this.resolveLaunch();
        this.startedWith = JSON.stringify(launch);
        if (!launch.ok) {
            return this.failed(launch.message);
        }
        // Never a workspace folder: Python would import a repository's `argparse.py` from it.
        let cwd: string;
        try {
            cwd = neutralDir(this.globalStorage());
        } catch (err) {
            return this.failed(`cannot create the extension's working directory: ${errorText(err)}`);
        }
        this.log(`Starting the language server: ${[launch.value.command, ...launch.value.args].join(' ')}`);
        for (const [name, value] of Object.entries(launch.value.env ?? {})) {
            this.log(`Demo/test mode (cudaLlm.server.evaluator): ${name}=${value}: GPU results are recorded outcomes, nothing is measured`);
        }
        const check = await checkServerInstalled(launch.value, undefined, { cwd });
        if (check.detail) {
            this.log(check.detail);
        }
        if (!check.ok) {
            return this.failed(check.message ?? 'the language server cannot be started', launch.value.python !== undefined);
        }
        this.offerUpdate(launch.value);
        const client = createClient({
            launch: launch.value,
            cwd,
            outputChannel: this.output,
            initializationOptions: () => {
                this.logIgnoredSettings();
                return initializationOptions(this.config(), this.apiKey, this.vars(), api.isWorkspaceTrusted());
            },
            configuration: (items, fallback) => this.configurationAnswer(items, fallback),
            onProgress: (token, value) => this.onProgress(token, value),
            onCommandResult: (command, args, result) => this.onCommandResult(command, args, result),
            onSuggestion: (params) => this.onSuggestion(params),
            onServerMessage: (type, message) => this.onServerMessage(type, message),
            refusal: (command) => this.refused(command),
        }, this.processes);
        this.client = client;
        // The library restarts a crashed server a few times; the status bar follows it, and jobs
        // of a server that went away are gone.
        this.stateListener = onStateChange(client, (state) => {
            if (this.client !== client) {
                return;
            }
            if (state !== 'running') {
                this.forgetJobs();
            }
            this.setState(state === 'stopped' ? { kind: 'failed', message: 'the language server stopped (see the output)' } : { kind: state });
        });
        try {
            await client.start();
            this.setState({ kind: 'running' });
        } catch (err) {
            this.client = undefined;
            await client.dispose().catch(() => undefined);
            await this.processes.terminate();
            return this.failed(`the language server did not start: ${errorText(err)}`);
        }
    }

    /** Restricted Mode: Optimize and Benchmark are refused, with the reason, from wherever they come. */
    private refused(command: string): string | undefined {
        const reason = untrustedRefusal(command, api.isWorkspaceTrusted());
        if (reason !== undefined) {
            this.log(`${command} refused: ${reason}`);
            this.show(messageView('warning', reason));
        }
        return reason;
    }

    private forgetJobs(): void {
        for (const ui of this.progressUi.values()) {
            ui.end();
        }
        this.progressUi.clear();
        this.jobs.clear();
        this.optimizations.clear();
    }

    private async doStop(): Promise<void> {
        const client = this.client;
        this.client = undefined;
        this.stateListener?.dispose();
        this.stateListener = undefined;
        this.forgetJobs();
        await this.forgetSuggestions();
        if (client !== undefined) {
            try {
                await client.dispose(5000);
            } catch (err) {
                this.log(`Stopping the language server: ${errorText(err)}`);
            }
        }
        await this.processes.terminate();
        this.setState({ kind: 'stopped' });
    }

    /**
     * Shows the problem with its fix; does not wait for the user (activation must not hang on a
     * toast). `offerInstall`: the interpreter lacks the server, so the first button installs it.
     */
    private failed(message: string, offerInstall = false): void {
        this.setState({ kind: 'failed', message });
        this.log(message);
        const items = offerInstall ? [INSTALL_BUTTON, 'Open Settings', SHOW_OUTPUT] : ['Open Settings', SHOW_OUTPUT];
        this.show(messageView('error', message, items), (choice) => {
            if (choice === 'Open Settings') {
                void api.openSettings('cudaLlm.server');
            } else if (choice === INSTALL_BUTTON) {
                void this.guard('install the server', () => this.installServer());
            }
        });
    }

    /** The extension's own venv holds an older wheel than the one shipped now: offer the update. */
    private offerUpdate(launch: ServerLaunch): void {
        const wheel = shippedWheel(this.context.extensionPath);
        const installed = installedWheel(this.globalStorage());
        if (!launch.managed || wheel === undefined || installed === path.basename(wheel)) {
            return;
        }
        const text = `this extension ships a newer server (${path.basename(wheel)}) than its environment has (${installed ?? 'unknown'}).`;
        this.log(text);
        this.show(messageView('info', text, [UPDATE_BUTTON]), (choice) => {
            if (choice === UPDATE_BUTTON) {
                void this.guard('update the server', () => this.installServer());
            }
        });
    }

    /**
     * CUDA-LLM: Install/Update Server: the shipped wheel into a venv in the extension's global
     * storage, with progress (and Cancel); the server then restarts on it unless the user's
     * settings choose another interpreter.
     */
    private async installServer(): Promise<void> {
        const storage = this.globalStorage();
        fs.mkdirSync(storage, { recursive: true });
        const wheel = shippedWheel(this.context.extensionPath);
        this.log(`Installing the server from ${wheel ?? '(no wheel shipped)'} into ${storage}`);
        this.output.show(true);
        let outcome: Awaited<ReturnType<typeof installServer>> | undefined;
        await api.withNotificationProgress('cuda-llm: installing the language server', true, async (progress, token) => {
            const abort = new AbortController();
            token.onCancellationRequested(() => abort.abort());
            const io = realIo(
                (line) => this.output.appendLine(line),
                (message) => progress.report({ message }),
            );
            outcome = await installServer(storage, wheel, io, abort.signal);
        });
        if (outcome === undefined || !outcome.ok) {
            const message = outcome?.message ?? 'the server install did not run';
            this.log(message);
            if (!outcome || !('cancelled' in outcome) || !outcome.cancelled) {
                this.show(messageView('error', message, [SHOW_OUTPUT]));
            }
            return;
        }
        this.log(`Server installed: ${outcome.python}`);
        if (userChoseServer(this.launchConfig())) {
            this.show(messageView('info', `the server is installed in the extension's environment, but cudaLlm.server.python / server.command choose another interpreter: clear them to use it.`, ['Open Settings']), (choice) => {
                if (choice === 'Open Settings') {
                    void api.openSettings('cudaLlm.server');
                }
            });
            return;
        }
        await this.restart();
        this.show(messageView('info', `the language server is installed (${outcome.python}) and running.`));
    }

    private setState(state: ServerState): void {
        this.state = state;
        this.render();
    }

    // ---- settings and the API key ------------------------------------------------------------

    private configurationAnswer(items: readonly ConfigurationItemLike[], fallback: unknown[]): unknown[] {
        return configurationAnswer(items, (scope) => this.config(scope), fallback, this.vars(), api.isWorkspaceTrusted());
    }

    private async onConfigurationChanged(affects: (key: string) => boolean): Promise<void> {
        const kind = changeKind(affects);
        if (kind === 'restart') {
            await this.restart();
        } else if (kind === 'forward') {
            await this.forwardSettings();
        }
    }

    /**
     * "Try the Demo": demo mode on (user settings) and sent to the server at once, then the
     * server writes a fresh copy of the recorded example to its data directory and the editor
     * opens it. Optimize on it answers from the recording: no GPU, no key, nothing sent.
     */
    private async tryDemo(): Promise<void> {
        await api.updateUserSetting(SECTION, 'demo', true);
        await this.lifecycle; // activated by this command: the server may still be starting
        const client = this.runningClient();
        await sendConfiguration(client, didChangeConfigurationParams(this.config(), this.vars()));
        const answer = await executeServerCommand(client, ServerCommand.demoExample, [{ open: false }]);
        const example = answer as { uri?: unknown; kernel?: unknown } | null;
        if (example === null || typeof example !== 'object' || typeof example.uri !== 'string') {
            throw new UserError('the server could not write the demo example (Output → CUDA-LLM says why)');
        }
        await api.openFile(example.uri);
        const kernel = typeof example.kernel === 'string' ? example.kernel : 'the kernel';
        void api.showInformationMessage(
            `CUDA-LLM demo: click Optimize above ${kernel}. The model's replies and the GPU's results ` +
                'come from a recorded session (no GPU, no API key, nothing sent); the diff, Accept and ' +
                'undo are real. Turn off the setting cudaLlm.demo for real runs.',
        );
    }

    private async forwardSettings(): Promise<void> {
        if (this.client?.isRunning()) {
            this.logIgnoredSettings();
            await sendConfiguration(this.client, didChangeConfigurationParams(this.config(), this.vars(), api.isWorkspaceTrusted()));
        }
    }

    /** Restricted Mode: says which workspace settings the server does not get, and why. */
    private logIgnoredSettings(): void {
        const ignored = ignoredWorkspaceSettings(this.config(), api.isWorkspaceTrusted());
        if (ignored.length > 0) {
            this.log(
                `Restricted Mode: the workspace's ${ignored.join(', ')} ${ignored.length === 1 ? 'is' : 'are'} ignored ` +
                    '(they name paths, compiler options or endpoints); trust the workspace to use them',
            );
        }
    }

    private setKey(key: string | undefined): void {
        this.apiKey = key === '' ? undefined : key;
        this.redactor.addSecret(this.apiKey);
    }

    private async setApiKey(): Promise<void> {
        const key = (await api.askSecret('API key for the OpenAI-compatible endpoint (stored in VS Code\'s secret storage)'))?.trim();
        if (!key) {
            return;
        }
        this.setKey(key);
        await this.context.secrets.store(API_KEY_SECRET, key);
        await this.applyKeyChange('API key stored');
    }

    private async clearApiKey(): Promise<void> {
        this.setKey(undefined);
        await this.context.secrets.delete(API_KEY_SECRET);
        await this.applyKeyChange('API key cleared');
    }

    /**
     * The key reaches the server only in `initializationOptions`, so it takes a restart; running
     * jobs are not cut short without asking.
     */
    private async applyKeyChange(what: string): Promise<void> {
        const running = this.jobs.all().length;
        if (running > 0) {
            const view = messageView('info', `${what}. The server uses it after a restart, which cancels the ${running} running job(s).`, ['Restart Now']);
            const choice = await api.showInformationMessage(view.text, ...view.items);
            if (choice !== 'Restart Now') {
                return;
            }
        }
        await this.restart();
        this.show(messageView('info', `${what}; the language server was restarted.`));
    }

    // ---- progress and the status bar --------------------------------------------------------

    private onProgress(token: ProgressToken, value: ProgressValue): void {
        if (this.jobs.update(token, value)) {
            this.render();
        }
        if (value.kind === 'begin') {
            this.showProgress(token, value.title, value.cancellable ?? false, value);
        } else if (value.kind === 'report') {
            this.progressUi.get(token)?.report(value);
        } else {
            this.progressUi.get(token)?.end();
            this.progressUi.delete(token);
            this.jobEnded(token, value.message);
        }
    }

    /** Which kernel each optimization is, from the server's `{token}` answer to `cudaLlm.optimize`. */
    private onCommandResult(command: string, args: unknown[], result: unknown): void {
        const token = jobToken(result);
        if (command === ServerCommand.optimize && token !== undefined && isKernelRef(args[0])) {
            this.optimizations.set(token, { ref: { uri: args[0].uri, kernel: args[0].kernel }, suggested: false });
        }
    }

    /**
     * A finished optimization whose end says a suggestion is ready, without a `cudaLlm/suggestion`
     * having arrived: ask the server to send it. Current servers send the notification before the
     * progress ends to clients declaring `experimental.cudaLlm.suggestionNotification` (we do), so
     * this only runs against older servers that sent it on `cudaLlm.showSuggestion` alone.
     */
    private jobEnded(token: ProgressToken, message: string | undefined): void {
        const job = this.optimizations.get(String(token));
        this.optimizations.delete(String(token));
        if (job === undefined || job.suggested || !endsWithSuggestion(message) || !this.client?.isRunning()) {
            return;
        }
        void executeServerCommand(this.client, ServerCommand.showSuggestion, kernelArgs(job.ref.uri, job.ref.kernel)).catch(
            (err) => this.log(`Fetching the suggestion for ${job.ref.kernel}: ${errorText(err)}`),
        );
    }

    private showProgress(
        token: ProgressToken,
        title: string,
        cancellable: boolean,
        first: { message?: string; percentage?: number },
    ): void {
        let reported = 0;
        let resolveEnd: () => void = () => undefined;
        const ended = new Promise<void>((resolve) => (resolveEnd = resolve));
        let progress: api.Progress<{ message?: string; increment?: number }> | undefined;
        const pending: Array<{ message?: string; percentage?: number }> = [first];
        const report = (value: { message?: string; percentage?: number }): void => {
            if (progress === undefined) {
                pending.push(value);
                return;
            }
            let increment: number | undefined;
            if (value.percentage !== undefined) {
                const pct = Math.max(0, Math.min(100, value.percentage));
                increment = Math.max(0, pct - reported);
                reported += increment;
            }
            progress.report({ message: value.message, increment });
        };
        this.progressUi.set(token, { report, end: resolveEnd });
        void api.withNotificationProgress(title, cancellable, (p, cancel) => {
            progress = p;
            pending.splice(0).forEach(report);
            cancel.onCancellationRequested(() => {
                if (this.client?.isRunning()) {
                    void cancelProgress(this.client, token).catch((err) => this.log(`Cancel failed: ${errorText(err)}`));
                }
            });
            return ended;
        });
    }

    private render(): void {
        const view = statusView(this.jobs.all(), this.state);
        this.status.text = view.text;
        this.status.tooltip = view.tooltip;
        this.status.command = view.action === 'cancel' ? ClientCommand.cancelAll : ClientCommand.showOutput;
        this.status.backgroundColor = view.error ? api.errorBackground() : undefined;
        this.status.show();
    }

    /**
     * Cancels every job through its progress token (standard LSP, what the notification's Cancel
     * does); `cudaLlm.cancel` with no argument ("cancel all") only when no job is known here.
     */
    private async cancelAll(): Promise<void> {
        const client = this.client;
        if (client === undefined || !client.isRunning()) {
            return;
        }
        const tokens = this.jobs.cancellableTokens();
        for (const token of tokens) {
            await cancelProgress(client, token);
        }
        if (tokens.length === 0) {
            await executeServerCommand(client, ServerCommand.cancel, cancelAllArgs());
        }
    }

    // ---- kernels and suggestions ------------------------------------------------------------

    private runningClient(): LanguageClient {
        if (this.client === undefined || !this.client.isRunning()) {
            const why = this.state.kind === 'failed' ? `: ${this.state.message}` : '';
            throw new UserError(`the language server is not running${why}`);
        }
        return this.client;
    }

    /** Optimize / Benchmark from the palette or the editor menu: the kernel at the cursor. */
    private async runOnKernel(command: string, arg: unknown): Promise<void> {
        const refused = untrustedRefusal(command, api.isWorkspaceTrusted());
        if (refused !== undefined) {
            throw new UserError(refused);
        }
        const client = this.runningClient();
        const ref = isKernelRef(arg) ? arg : await this.kernelAtCursor();
        if (ref !== undefined) {
            const args = kernelArgs(ref.uri, ref.kernel);
            this.onCommandResult(command, args, await executeServerCommand(client, command, args));
        }
    }

    private async kernelAtCursor(): Promise<KernelRef | undefined> {
        const editor = api.activeTextEditor();
        if (editor === undefined || editor.document.languageId !== 'cuda-cpp') {
            throw new UserError('open a CUDA file (.cu / .cuh) and put the cursor in a kernel');
        }
        const uri = editor.document.uri.toString();
        let kernels = kernelsFromLenses(await api.codeLenses(editor.document.uri), uri);
        if (kernels.length === 0) {
            kernels = scanKernels(editor.document.getText());
        }
        const found = kernelAt(kernels, editor.selection.active.line);
        if (found === undefined) {
            throw new UserError('no __global__ kernel found in this file');
        }
        return { uri, kernel: found.kernel };
    }

    private onSuggestion(raw: unknown): void {
        const parsed = parseSuggestion(raw);
        if (!parsed.ok) {
            this.log(parsed.error);
            return;
        }
        const s = parsed.value;
        const previous = this.suggestions.get(s);
        const stored = this.suggestions.put(s);
        for (const job of this.optimizations.values()) {
            if (job.ref.uri === s.uri && job.ref.kernel === s.kernel) {
                job.suggested = true;
            }
        }
        if (s.speedup !== undefined) {
            this.jobs.noteSpeedup(s.speedup);
            this.render();
        }
        this.log(suggestionLogLine(s));
        void this.updateContext();
        void (async () => {
            if (previous !== undefined) {
                this.closeNotice(previous.id);
                await api.closeDiffTabs(SUGGESTION_SCHEME, (path) => parseSuggestionDocPath(path)?.id === previous.id);
            }
            await this.showDiff(stored);
            // Accept (✓) and Reject (✗) are in the diff's title bar; the notification goes away
            // when the suggestion is decided there, replaced, or forgotten with its server.
            if (this.suggestions.byId(stored.id) !== undefined && !this.notices.has(stored.id)) {
                let close: () => void = () => undefined;
                const closed = new Promise<void>((resolve) => (close = resolve));
                this.notices.set(stored.id, close);
                api.showNotice(notificationText(s), closed);
            }
        })().catch((err) => this.log(`Showing the suggestion for ${s.kernel}: ${errorText(err)}`));
    }

    private closeNotice(id: number): void {
        this.notices.get(id)?.();
        this.notices.delete(id);
    }

    /** The server forgets its suggestions when it stops; so do we, with their notifications and diffs. */
    private async forgetSuggestions(): Promise<void> {
        const ids = new Set(this.suggestions.pending().map((stored) => stored.id));
        for (const id of [...this.notices.keys()]) {
            this.closeNotice(id);
        }
        if (ids.size === 0) {
            return;
        }
        this.suggestions.clear();
        await this.updateContext();
        await api
            .closeDiffTabs(SUGGESTION_SCHEME, (path) => ids.has(parseSuggestionDocPath(path)?.id ?? -1))
            .then(undefined, (err) => this.log(`Closing the suggestion diffs: ${errorText(err)}`));
    }

    private async showDiff(stored: StoredSuggestion): Promise<void> {
        const { id, suggestion } = stored;
        const left = suggestionDocUri(id, suggestion.kernel, 'original');
        const right = suggestionDocUri(id, suggestion.kernel, 'suggested');
        this.refreshDoc(left);
        this.refreshDoc(right);
        await api.openDiff(left, right, diffTitle(suggestion));
    }

    /** The suggestion a command is about: from its argument, the active diff or document, or a pick. */
    private async pickSuggestion(arg: unknown): Promise<StoredSuggestion | undefined> {
        if (isKernelRef(arg)) {
            return this.suggestions.get(arg) ?? this.missing(arg.kernel);
        }
        const fromUri = (uri: api.Uri): StoredSuggestion | undefined => {
            const parsed = uri.scheme === SUGGESTION_SCHEME ? parseSuggestionDocPath(uri.path) : undefined;
            return parsed && this.suggestions.byId(parsed.id);
        };
        if (api.isUri(arg)) {
            if (arg.scheme === SUGGESTION_SCHEME) {
                return fromUri(arg) ?? this.missing('this kernel');
            }
        }
        const editor = api.activeTextEditor();
        const active = editor && fromUri(editor.document.uri);
        if (active) {
            return active;
        }
        const docUri = api.isUri(arg) ? arg.toString() : editor?.document.uri.toString();
        const inDoc = docUri === undefined ? [] : this.suggestions.pending(docUri);
        const candidates = inDoc.length > 0 ? inDoc : this.suggestions.pending();
        if (candidates.length === 0) {
            throw new UserError('no suggestion is pending');
        }
        if (candidates.length === 1) {
            return candidates[0];
        }
        const picked = await api.showQuickPick(
            candidates.map((stored) => ({
                label: stored.suggestion.kernel,
                description: figures(stored.suggestion),
                detail: stored.suggestion.uri,
                stored,
            })),
            { placeHolder: 'Which suggestion?' },
        );
        return picked?.stored;
    }

    private missing(what: string): undefined {
        throw new UserError(`no pending suggestion for ${what} (it was accepted, rejected or replaced)`);
    }

    private async showPicked(arg: unknown): Promise<void> {
        const stored = await this.pickSuggestion(arg);
        if (stored !== undefined) {
            await this.showDiff(stored);
        }
    }

    /**
     * Accept or Reject: the server makes (or refuses) the edit; we forget the suggestion, close its
     * diff and its notification once it has. Accept is refused here, with the reason, when the
     * kernel in the open document is no longer the text the run started from (the server would
     * refuse it too).
     */
    private async decide(decision: 'accept' | 'reject', arg: unknown): Promise<void> {
        const stored = await this.pickSuggestion(arg);
        if (stored === undefined) {
            return;
        }
        const { suggestion } = stored;
        const client = this.runningClient();
        if (decision === 'accept') {
            const stale = staleReason(suggestion, api.documentText(suggestion.uri));
            if (stale !== undefined) {
                this.log(`Accept of ${suggestion.kernel} refused: ${stale}`);
                this.show(messageView('warning', stale));
                return;
            }
            const result = await executeServerCommand(client, ServerCommand.accept, acceptArgs(suggestion.uri, suggestion.kernel));
            if (acceptRefused(result)) {
                // The suggestion stays to show. A server that gives the reason leaves it to us to
                // say; an older one has said it in its own message.
                const reason = refusalReason(result);
                this.log(`Accept of ${suggestion.kernel} refused by the server: ${reason ?? 'see its message'}`);
                if (reason !== undefined) {
                    this.show(messageView('warning', refusalText(reason)));
                }
                return;
            }
        } else {
            await executeServerCommand(client, ServerCommand.reject, kernelArgs(suggestion.uri, suggestion.kernel));
        }
        if (this.suggestions.get(suggestion)?.id === stored.id) {
            this.suggestions.remove(suggestion);
        }
        this.closeNotice(stored.id);
        await this.updateContext();
        await api.closeDiffTabs(SUGGESTION_SCHEME, (path) => parseSuggestionDocPath(path)?.id === stored.id);
    }

    private updateContext(): Thenable<unknown> {
        return api.setContext(SUGGESTION_CONTEXT_KEY, this.suggestions.pending().length > 0);
    }

    // ---- errors and logging ------------------------------------------------------------------

    private log(message: string): void {
        this.output.appendLine(`[cuda-llm] ${message}`);
    }

    /** A message shown as `messageView` says; "Show Output" opens the output. */
    private show(view: MessageView, then?: (choice: string | undefined) => void): void {
        const shown: Record<MessageLevel, (text: string, ...items: string[]) => Thenable<string | undefined>> = {
            error: api.showErrorMessage,
            warning: api.showWarningMessage,
            info: api.showInformationMessage,
        };
        void shown[view.level](view.text, ...view.items).then((choice) => {
            if (choice === SHOW_OUTPUT) {
                this.output.show(true);
            }
            then?.(choice);
        });
    }

    /** `window/showMessage`: every message goes to the output; errors, warnings and infos are shown in full. */
    private onServerMessage(type: number, message: string): void {
        const level = serverMessageLevel(type);
        const text = redactText(message, this.apiKey ? [this.apiKey] : []);
        this.log(`server${level === undefined ? '' : ` ${level}`}: ${text}`);
        if (level !== undefined) {
            this.show(messageView(level, text));
        }
    }

    /** Runs a command handler; failures become one clear message, never an unhandled rejection. */
    private async guard(what: string, body: () => unknown): Promise<void> {
        try {
            await body();
        } catch (err) {
            const message = redactText(errorText(err), this.apiKey ? [this.apiKey] : []);
            this.log(`${what}: ${message}`);
            this.show(messageView('error', message));
        }
    }
}

/** A problem the user can fix; shown as it is. */
export class UserError extends Error {}

function errorText(err: unknown): string {
    return err instanceof Error ? err.message : String(err);
}
