/**
 * The one module (besides extension.ts and the language-client wiring) that touches `vscode`.
 *
 * Thin pass-throughs, as in Microsoft's Python tools extension template: the rest of the code calls
 * these, so everything in `common/` stays plain TypeScript that node's test runner can load.
 */

import * as vscode from 'vscode';
import { Redactor, RedactingSink } from './common/log';

export type {
    CancellationToken,
    Disposable,
    ExtensionContext,
    OutputChannel,
    Progress,
    StatusBarItem,
    TextEditor,
    Uri,
} from 'vscode';

export const ProgressLocation = vscode.ProgressLocation;
export const StatusBarAlignment = vscode.StatusBarAlignment;

export function createOutputChannel(name: string): vscode.OutputChannel {
    return vscode.window.createOutputChannel(name);
}

/** An output channel whose every write goes through the redactor first. */
export function redactingChannel(channel: vscode.OutputChannel, redactor: Redactor): vscode.OutputChannel {
    const sink = new RedactingSink(channel, redactor);
    return {
        get name() {
            return channel.name;
        },
        append: (value: string) => sink.append(value),
        appendLine: (value: string) => sink.appendLine(value),
        replace: (value: string) => sink.replace(value),
        clear: () => {
            sink.flush();
            channel.clear();
        },
        show: (a?: unknown, b?: boolean) => {
            sink.flush();
            if (typeof a === 'boolean' || a === undefined) {
                channel.show(a);
            } else {
                channel.show(a as vscode.ViewColumn, b);
            }
        },
        hide: () => channel.hide(),
        dispose: () => {
            sink.flush();
            channel.dispose();
        },
    };
}

export function getConfiguration(section: string, scope?: string): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration(section, scope === undefined ? undefined : vscode.Uri.parse(scope));
}

/** Sets `section.key` in the user's settings (never a workspace's, which may be shared). */
export function updateUserSetting(section: string, key: string, value: unknown): Thenable<void> {
    return vscode.workspace.getConfiguration(section).update(key, value, vscode.ConfigurationTarget.Global);
}

/** Opens the file `uri` in a (non-preview) editor, focused. */
export async function openFile(uri: string): Promise<void> {
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(uri));
    await vscode.window.showTextDocument(doc, { preview: false });
}

export function onDidChangeConfiguration(
    listener: (e: vscode.ConfigurationChangeEvent) => unknown,
): vscode.Disposable {
    return vscode.workspace.onDidChangeConfiguration(listener);
}

/** False in Restricted Mode (an untrusted workspace). */
export function isWorkspaceTrusted(): boolean {
    return vscode.workspace.isTrusted !== false;
}

export function onDidGrantWorkspaceTrust(listener: () => unknown): vscode.Disposable {
    return vscode.workspace.onDidGrantWorkspaceTrust(listener);
}

export function firstWorkspaceFolder(): string | undefined {
    return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

export function registerCommand(id: string, handler: (...args: any[]) => unknown): vscode.Disposable {
    return vscode.commands.registerCommand(id, handler);
}

export function executeCommand<T = unknown>(id: string, ...args: unknown[]): Thenable<T> {
    return vscode.commands.executeCommand<T>(id, ...args);
}

export function setContext(key: string, value: unknown): Thenable<unknown> {
    return vscode.commands.executeCommand('setContext', key, value);
}

export function showInformationMessage(message: string, ...items: string[]): Thenable<string | undefined> {
    return vscode.window.showInformationMessage(message, ...items);
}

export function showWarningMessage(message: string, ...items: string[]): Thenable<string | undefined> {
    return vscode.window.showWarningMessage(message, ...items);
}

export function showErrorMessage(message: string, ...items: string[]): Thenable<string | undefined> {
    return vscode.window.showErrorMessage(message, ...items);
}

export function showQuickPick<T extends vscode.QuickPickItem>(
    items: T[],
    options: vscode.QuickPickOptions,
): Thenable<T | undefined> {
    return vscode.window.showQuickPick(items, options);
}

export function askSecret(prompt: string): Thenable<string | undefined> {
    return vscode.window.showInputBox({ prompt, password: true, ignoreFocusOut: true, placeHolder: 'sk-...' });
}

export function activeTextEditor(): vscode.TextEditor | undefined {
    return vscode.window.activeTextEditor;
}

export function createStatusBarItem(id: string, name: string): vscode.StatusBarItem {
    const item = vscode.window.createStatusBarItem(id, vscode.StatusBarAlignment.Left, 10);
    item.name = name;
    return item;
}

export function errorBackground(): vscode.ThemeColor {
    return new vscode.ThemeColor('statusBarItem.errorBackground');
}

export function withNotificationProgress(
    title: string,
    cancellable: boolean,
    task: (progress: vscode.Progress<{ message?: string; increment?: number }>, token: vscode.CancellationToken) => Thenable<void>,
): Thenable<void> {
    return vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable }, task);
}

/**
 * A notification that stays until `until` settles, then goes away by itself. It is a progress
 * notification because that is the only kind an extension can close: a message with buttons
 * would outlive what it is about (VS Code has no API to dismiss one).
 */
export function showNotice(title: string, until: Thenable<unknown>): void {
    void vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: false }, (progress) => {
        progress.report({ increment: 100 }); // a full bar, not a spinning one: nothing is running
        return until;
    });
}

/** The text of an open document, or undefined when it is not open. */
export function documentText(uri: string): string | undefined {
    return vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri)?.getText();
}

export function parseUri(value: string): vscode.Uri {
    return vscode.Uri.parse(value);
}

export function isUri(value: unknown): value is vscode.Uri {
    return value instanceof vscode.Uri;
}

/** Serves virtual documents of one scheme from a function of the URI's path; `refresh` re-reads one. */
export function registerContentProvider(
    scheme: string,
    content: (path: string) => string,
): { disposable: vscode.Disposable; refresh: (uri: string) => void } {
    const changed = new vscode.EventEmitter<vscode.Uri>();
    const provider: vscode.TextDocumentContentProvider = {
        onDidChange: changed.event,
        provideTextDocumentContent: (uri) => content(uri.path),
    };
    const registration = vscode.workspace.registerTextDocumentContentProvider(scheme, provider);
    return {
        disposable: vscode.Disposable.from(registration, changed),
        refresh: (uri) => changed.fire(vscode.Uri.parse(uri)),
    };
}

/**
 * Opens VS Code's diff editor beside the current one, focused: its editor-title actions (Accept ✓,
 * Reject ✗) show at once only in the active group.
 */
export function openDiff(left: string, right: string, title: string): Thenable<unknown> {
    return vscode.commands.executeCommand('vscode.diff', vscode.Uri.parse(left), vscode.Uri.parse(right), title, {
        preview: true,
        preserveFocus: false,
        viewColumn: vscode.ViewColumn.Beside,
    } satisfies vscode.TextDocumentShowOptions);
}

/** Closes the diff tabs whose right side is a document of `scheme` accepted by `match` (its path). */
export async function closeDiffTabs(scheme: string, match: (path: string) => boolean): Promise<void> {
    const tabs = vscode.window.tabGroups.all
        .flatMap((group) => group.tabs)
        .filter((tab) => {
            const input = tab.input;
            return input instanceof vscode.TabInputTextDiff && input.modified.scheme === scheme && match(input.modified.path);
        });
    if (tabs.length > 0) {
        await vscode.window.tabGroups.close(tabs, true);
    }
}

/** The server's code lenses for a document (they name its kernels). */
export async function codeLenses(uri: vscode.Uri): Promise<vscode.CodeLens[]> {
    return (await vscode.commands.executeCommand<vscode.CodeLens[] | undefined>('vscode.executeCodeLensProvider', uri)) ?? [];
}

export function openSettings(query: string): Thenable<unknown> {
    return vscode.commands.executeCommand('workbench.action.openSettings', query);
}
