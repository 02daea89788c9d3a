/**
 * A stand-in for the `vscode` module, enough to activate the bundled extension in node and to run
 * vscode-languageclient against a real server process. Everything the tests look at is recorded in
 * `fake`; anything not modelled answers with an inert stub (events return disposables, lists are empty).
 */

/* eslint-disable @typescript-eslint/no-explicit-any */

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

type Listener<T> = (e: T) => unknown;

function stub(name: string): any {
    const target = function () {
        return undefined;
    };
    return new Proxy(target, {
        get(t, prop) {
            if (prop === 'then') {
                return undefined;
            }
            if (prop === Symbol.iterator) {
                return function* () {};
            }
            if (prop === 'dispose') {
                return () => undefined;
            }
            if (prop === 'length') {
                return 0;
            }
            if (prop === 'prototype') {
                return t.prototype;
            }
            if (prop === Symbol.toPrimitive) {
                return () => `[stub ${name}]`;
            }
            return stub(`${name}.${String(prop)}`);
        },
        apply() {
            return stub(`${name}()`);
        },
        construct() {
            return stub(`new ${name}`);
        },
    });
}

function withStubs<T extends object>(name: string, explicit: T): T {
    return new Proxy(explicit, {
        get(t, prop, receiver) {
            if (prop in t || typeof prop === 'symbol') {
                return Reflect.get(t, prop, receiver);
            }
            return stub(`${name}.${String(prop)}`);
        },
    });
}

export class Disposable {
    static from(...items: Array<{ dispose(): unknown }>): Disposable {
        return new Disposable(() => items.forEach((i) => i.dispose()));
    }
    constructor(private readonly fn: () => unknown) {}
    dispose(): void {
        this.fn();
    }
}

export class EventEmitter<T> {
    private listeners: Array<Listener<T>> = [];
    event = (listener: Listener<T>): Disposable => {
        this.listeners.push(listener);
        return new Disposable(() => (this.listeners = this.listeners.filter((l) => l !== listener)));
    };
    fire(e: T): void {
        this.listeners.forEach((l) => l(e));
    }
    dispose(): void {
        this.listeners = [];
    }
}

export class CancellationTokenSource {
    private readonly emitter = new EventEmitter<void>();
    token = {
        isCancellationRequested: false,
        onCancellationRequested: this.emitter.event,
    };
    cancel(): void {
        this.token.isCancellationRequested = true;
        this.emitter.fire();
    }
    dispose(): void {}
}

export class CancellationError extends Error {}

export class Uri {
    private constructor(
        readonly scheme: string,
        readonly authority: string,
        readonly path: string,
        readonly query: string,
        readonly fragment: string,
    ) {}
    static parse(value: string): Uri {
        const m = /^([a-zA-Z][\w+.-]*):(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/.exec(value);
        if (!m) {
            throw new Error(`fake vscode: cannot parse URI ${value}`);
        }
        return new Uri(m[1], m[2] ?? '', decodeURIComponent(m[3]), m[4] ?? '', m[5] ?? '');
    }
    static file(path: string): Uri {
        return new Uri('file', '', path, '', '');
    }
    get fsPath(): string {
        return this.path;
    }
    toString(): string {
        const authority = this.authority !== '' || this.scheme === 'file' ? `//${this.authority}` : '';
        return `${this.scheme}:${authority}${this.path}${this.query ? `?${this.query}` : ''}${this.fragment ? `#${this.fragment}` : ''}`;
    }
    toJSON(): unknown {
        return this.toString();
    }
}

export class ThemeColor {
    constructor(readonly id: string) {}
}

export class TabInputTextDiff {
    constructor(
        readonly original: Uri,
        readonly modified: Uri,
    ) {}
}
export class TabInputText {
    constructor(readonly uri: Uri) {}
}
export class TabInputCustom {
    constructor(readonly uri: Uri) {}
}

export const ProgressLocation = { SourceControl: 1, Window: 10, Notification: 15 };
export const StatusBarAlignment = { Left: 1, Right: 2 };
export const ViewColumn = { Active: -1, Beside: -2, One: 1, Two: 2 };
export const version = '1.85.0';

export interface RecordedProgress {
    title: string;
    cancellable: boolean;
    reports: Array<{ message?: string; increment?: number }>;
    cancel: () => void;
    done: boolean;
}

/** What the extension did, for the tests to check; and the user's scripted answers. */
export const fake = {
    /** User settings (and the manifest's defaults, put there by resetSettings). */
    settings: new Map<string, unknown>(),
    /** A workspace's `.vscode/settings.json`: wins in `get`, reported apart by `inspect`. */
    workspaceSettings: new Map<string, unknown>(),
    /** `workspace.isTrusted`; false is Restricted Mode. */
    trusted: true,
    trustGranted: new EventEmitter<void>(),
    secrets: new Map<string, string>(),
    commands: new Map<string, (...args: any[]) => unknown>(),
    executed: [] as Array<{ id: string; args: unknown[] }>,
    output: '',
    messages: [] as Array<{ level: string; text: string; items: string[] }>,
    /** Picks the button of a message; undefined dismisses it. */
    answer: (_text: string, _items: string[]): string | undefined => undefined,
    inputBoxAnswer: undefined as string | undefined,
    progress: [] as RecordedProgress[],
    statusBar: { text: '', tooltip: '' as unknown, command: '' as unknown, visible: false },
    statusHistory: [] as string[],
    contentProviders: new Map<string, { provideTextDocumentContent(uri: Uri): string }>(),
    /** Open documents, as `workspace.textDocuments`; add before activation to have them synced. */
    documents: [] as FakeDocument[],
    configListeners: new EventEmitter<{ affectsConfiguration(key: string): boolean }>(),
    reset(): void {
        this.commands.clear();
        this.executed = [];
        this.output = '';
        this.messages = [];
        this.progress = [];
        this.contentProviders.clear();
        this.documents = [];
        this.workspaceSettings.clear();
        this.trusted = true;
    },
};

export interface FakeDocument {
    uri: Uri;
    languageId: string;
    version: number;
    getText(): string;
    isClosed: boolean;
}

export function makeDocument(uri: string, languageId: string, text: string): FakeDocument {
    return { uri: Uri.parse(uri), languageId, version: 1, getText: () => text, isClosed: false };
}

function message(level: string) {
    return (text: string, ...rest: any[]): Promise<string | undefined> => {
        const items = rest.filter((r): r is string => typeof r === 'string');
        fake.messages.push({ level, text, items });
        return Promise.resolve(fake.answer(text, items));
    };
}

export const window = withStubs('window', {
    createOutputChannel(name: string) {
        return {
            name,
            append: (v: string) => (fake.output += v),
            appendLine: (v: string) => (fake.output += `${v}\n`),
            replace: (v: string) => (fake.output = v),
            clear: () => (fake.output = ''),
            show: () => undefined,
            hide: () => undefined,
            dispose: () => undefined,
        };
    },
    createStatusBarItem() {
        const item = fake.statusBar;
        let text = '';
        Object.defineProperty(item, 'text', {
            get: () => text,
            set: (value: string) => {
                text = value;
                fake.statusHistory.push(value);
            },
            configurable: true,
        });
        return Object.assign(item, {
            name: '',
            backgroundColor: undefined,
            show: () => (item.visible = true),
            hide: () => (item.visible = false),
            dispose: () => (item.visible = false),
        });
    },
    showInformationMessage: message('info'),
    showWarningMessage: message('warning'),
    showErrorMessage: message('error'),
    showQuickPick: async (items: unknown[]) => items[0],
    showInputBox: async () => fake.inputBoxAnswer,
    withProgress(options: { title?: string; cancellable?: boolean }, task: (progress: any, token: any) => Promise<unknown>) {
        const source = new CancellationTokenSource();
        const record: RecordedProgress = {
            title: options.title ?? '',
            cancellable: options.cancellable ?? false,
            reports: [],
            cancel: () => source.cancel(),
            done: false,
        };
        fake.progress.push(record);
        return Promise.resolve(task({ report: (v: any) => record.reports.push(v) }, source.token)).finally(() => (record.done = true));
    },
    activeTextEditor: undefined,
    visibleTextEditors: [],
    tabGroups: { all: [], close: async () => true, onDidChangeTabs: () => new Disposable(() => undefined) },
});

export const workspace = withStubs('workspace', {
    workspaceFolders: undefined,
    rootPath: undefined,
    get textDocuments() {
        return fake.documents;
    },
    get isTrusted() {
        return fake.trusted;
    },
    onDidGrantWorkspaceTrust: fake.trustGranted.event,
    getConfiguration(section?: string) {
        const prefix = section ? `${section}.` : '';
        return {
            get: (key: string, defaultValue?: unknown) => fake.workspaceSettings.get(prefix + key) ?? fake.settings.get(prefix + key) ?? defaultValue,
            has: (key: string) => fake.settings.has(prefix + key) || fake.workspaceSettings.has(prefix + key),
            inspect: (key: string) => ({
                key: prefix + key,
                globalValue: fake.settings.get(prefix + key),
                workspaceValue: fake.workspaceSettings.get(prefix + key),
            }),
            update: async () => undefined,
        };
    },
    onDidChangeConfiguration: fake.configListeners.event,
    registerTextDocumentContentProvider(scheme: string, provider: { provideTextDocumentContent(uri: Uri): string }) {
        fake.contentProviders.set(scheme, provider);
        return new Disposable(() => fake.contentProviders.delete(scheme));
    },
});

export const commands = withStubs('commands', {
    registerCommand(id: string, handler: (...args: any[]) => unknown) {
        if (fake.commands.has(id)) {
            throw new Error(`command '${id}' already exists`);
        }
        fake.commands.set(id, handler);
        return new Disposable(() => fake.commands.delete(id));
    },
    async executeCommand(id: string, ...args: unknown[]) {
        fake.executed.push({ id, args });
        const handler = fake.commands.get(id);
        return handler ? handler(...args) : undefined;
    },
    async getCommands() {
        return [...fake.commands.keys()];
    },
});

export const languages = withStubs('languages', {
    match(selector: unknown, document: FakeDocument): number {
        const filters = (Array.isArray(selector) ? selector : [selector]) as Array<string | { language?: string; scheme?: string }>;
        const hit = filters.some((f) =>
            typeof f === 'string'
                ? f === document.languageId
                : (f.language === undefined || f.language === document.languageId) && (f.scheme === undefined || f.scheme === document.uri.scheme),
        );
        return hit ? 10 : 0;
    },
});

export const env = withStubs('env', {
    appName: 'Fake VS Code',
    language: 'en',
    machineId: 'fake',
    sessionId: 'fake',
});

export const extensions = withStubs('extensions', { all: [], getExtension: () => undefined });

/** An ExtensionContext with in-memory secrets. */
export function makeContext(): any {
    const changed = new EventEmitter<{ key: string }>();
    return {
        subscriptions: [] as Array<{ dispose(): unknown }>,
        secrets: {
            get: async (key: string) => fake.secrets.get(key),
            store: async (key: string, value: string) => {
                fake.secrets.set(key, value);
                changed.fire({ key });
            },
            delete: async (key: string) => {
                fake.secrets.delete(key);
                changed.fire({ key });
            },
            onDidChange: changed.event,
        },
        extensionPath: __dirname,
        globalStorageUri: Uri.file(fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-storage-'))),
        globalState: { get: () => undefined, update: async () => undefined },
        workspaceState: { get: () => undefined, update: async () => undefined },
    };
}

// Names not modelled above (CodeLens, CompletionItem, ... which the client library extends at load
// time) become inert stubs.
module.exports = withStubs('vscode', module.exports);
