/**
 * The language-client wiring: how the server is started and which of its messages the extension
 * takes over.
 *
 * Taken over: `workspace/configuration` for `cudaLlm` (answered with the server's view of the
 * settings), the results of server commands (to learn which job is which kernel), work-done progress (shown by the session as a notification with Cancel, instead of the
 * library's silent window progress), `window/showMessage` (logged, and shown in full), and the
 * `cudaLlm/suggestion` notification.
 */

import type * as vscode from 'vscode';
import {
    ConfigurationParams,
    DidChangeConfigurationNotification,
    ExecuteCommandRequest,
    LanguageClient,
    LanguageClientOptions,
    ResponseError,
    RevealOutputChannelOn,
    ServerOptions,
    ShowMessageNotification,
    State,
    StaticFeature,
    WorkDoneProgressCancelNotification,
} from 'vscode-languageclient/node';
import { ProgressToken, ProgressValue } from './common/status';
import { ServerLaunch } from './common/serverCommand';
import { ServerProcesses } from './common/serverProcesses';
import { SUGGESTION_NOTIFICATION } from './common/suggestion';

export const CLIENT_ID = 'cudaLlm';
export const CLIENT_NAME = 'CUDA-LLM';

export interface ClientHooks {
    readonly launch: ServerLaunch;
    /** The server's working directory: the extension's neutral one, never a workspace folder. */
    readonly cwd: string;
    readonly outputChannel: vscode.OutputChannel;
    /** Computed at every (re)start, so a new API key is picked up by a restart. */
    readonly initializationOptions: () => unknown;
    /** Our answer for the items of a `workspace/configuration` request; `fallback` is VS Code's. */
    readonly configuration: (items: ConfigurationParams['items'], fallback: unknown[]) => unknown[];
    readonly onProgress: (token: ProgressToken, value: ProgressValue) => void;
    /** Every server command run through VS Code (code lenses, code actions), with its result. */
    readonly onCommandResult: (command: string, args: unknown[], result: unknown) => void;
    readonly onSuggestion: (params: unknown) => void;
    /** `window/showMessage` from the server (MessageType: 1 error, 2 warning, 3 info, 4 log). */
    readonly onServerMessage: (type: number, message: string) => void;
    /**
     * Why a server command may not run now (Restricted Mode; the hook tells the user), or
     * undefined; checked for every caller, code lenses and light-bulb actions included.
     */
    readonly refusal: (command: string) => string | undefined;
}

/**
 * Tells the server this client shows `cudaLlm/suggestion` as a diff, so it need not also open the
 * suggested file with `window/showDocument`.
 */
class SuggestionCapability implements StaticFeature {
    getState(): { kind: 'static' } {
        return { kind: 'static' };
    }
    fillClientCapabilities(capabilities: { experimental?: unknown }): void {
        const experimental = (capabilities.experimental ?? {}) as Record<string, unknown>;
        capabilities.experimental = { ...experimental, cudaLlm: { suggestionNotification: true } };
    }
    initialize(): void {}
    clear(): void {}
}

export function createClient(hooks: ClientHooks, processes: ServerProcesses): LanguageClient {
    // Started by us rather than from an `Executable`, so that `processes` knows every server
    // process. Plain stdio: `TransportKind.stdio` would append `--stdio` to the command line,
    // which `python -m cuda_llm_lsp` (and user wrapper commands) need not accept.
    const serverOptions: ServerOptions = () => processes.spawn(hooks.launch, hooks.cwd);
    const clientOptions: LanguageClientOptions = {
        documentSelector: [
            { scheme: 'file', language: 'cuda-cpp' },
            { scheme: 'untitled', language: 'cuda-cpp' },
        ],
        outputChannel: hooks.outputChannel,
        traceOutputChannel: hooks.outputChannel,
        revealOutputChannelOn: RevealOutputChannelOn.Never,
        initializationOptions: hooks.initializationOptions,
        middleware: {
            executeCommand: async (command, args, next) => {
                const refused = hooks.refusal(command);
                if (refused !== undefined) {
                    return undefined; // said by the hook
                }
                const result = await next(command, args);
                hooks.onCommandResult(command, args, result);
                return result;
            },
            workspace: {
                configuration: async (params, token, next) => {
                    const fallback = await next(params, token);
                    if (fallback instanceof ResponseError) {
                        return fallback;
                    }
                    return hooks.configuration(params.items, fallback);
                },
            },
            handleWorkDoneProgress: (token, params, next) => {
                hooks.onProgress(token, params as ProgressValue);
                // The library's own progress part only needs the end, to clean up.
                if (params.kind === 'end') {
                    next(token, params);
                }
            },
        },
    };
    const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
    client.registerFeature(new SuggestionCapability());
    client.onNotification(SUGGESTION_NOTIFICATION, (params: unknown) => hooks.onSuggestion(params));
    // Replaces the library's handler (registered before ours, under the same method).
    client.onNotification(ShowMessageNotification.type, (params) => hooks.onServerMessage(params.type, params.message));
    return client;
}

/** Runs one of the server's `workspace/executeCommand` commands. */
export function executeServerCommand(client: LanguageClient, command: string, args: unknown[]): Promise<unknown> {
    return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
}

/** Calls `listener` with 'running' / 'starting' / 'stopped' whenever the client's state changes. */
export function onStateChange(client: LanguageClient, listener: (state: 'running' | 'starting' | 'stopped') => void): { dispose(): unknown } {
    return client.onDidChangeState((e) =>
        listener(e.newState === State.Running ? 'running' : e.newState === State.Starting ? 'starting' : 'stopped'),
    );
}

export function cancelProgress(client: LanguageClient, token: ProgressToken): Promise<void> {
    return client.sendNotification(WorkDoneProgressCancelNotification.type, { token });
}

export function sendConfiguration(client: LanguageClient, params: unknown): Promise<void> {
    return client.sendNotification(DidChangeConfigurationNotification.type, params as { settings: unknown });
}
