/**
 * VS Code settings (section `cudaLlm`) -> what the server reads.
 *
 * The server takes the same mapping from `initializationOptions` (`{cudaLlm: {...}, apiKey}`),
 * from `workspace/configuration` for the section `cudaLlm`, and from
 * `workspace/didChangeConfiguration` (`{settings: {cudaLlm: {...}}}`). The API key comes from
 * SecretStorage, never from settings, and travels only in `initializationOptions` (the server
 * ignores, and warns about, a key in workspace settings): a new key means a server restart.
 *
 * Workspace trust: a cloned repository's `.vscode/settings.json` is not the user's word. In
 * Restricted Mode the settings that name paths outside the workspace, raw compiler options or
 * where code and the key are sent (`RESTRICTED_SERVER_KEYS`) are read from user settings only
 * (`inspect`: the global value, never a workspace or folder one), and the server is told
 * `workspaceTrusted: false` (in `initializationOptions` and with every settings change) so it
 * applies its own rules too (include paths inside the workspace only).
 *
 * `persistentPch` (keep header PCHs across sessions: the server's compile processes that read the
 * user's files then run without address-space randomization) is sent true by default in a trusted
 * workspace, the user may set it false, and it is false in Restricted Mode whatever is set.
 */

/** Reads one key relative to the `cudaLlm` section (vscode.WorkspaceConfiguration satisfies it). */
export interface ConfigReader {
    get<T>(key: string): T | undefined;
}

/** Paths in settings may use these, as in VS Code's own settings. */
export interface PathVariables {
    readonly workspaceFolder?: string;
    readonly home?: string;
}

/** The settings the server understands, under the names it reads (`config.settings_from_mapping`). */
export interface ServerSettings {
    model?: string;
    baseUrl?: string;
    rounds?: number;
    candidates?: number;
    arch?: string;
    includePaths?: string[];
    defines?: string[];
    nvrtcFlags?: string[];
    std?: string;
    compileCommandsDir?: string;
    debounceMs?: number;
    maxTokens?: number;
    temperature?: number;
    reasoningEffort?: string;
    strategy?: string;
    launch?: string;
    compileTimeoutS?: number;
    repairs?: number;
    gpus?: string;
    cluster?: string;
    demo?: boolean;
    captureCommand?: string[];
    captureCwd?: string;
    persistentPch?: boolean;
    apiKey?: string;
}

export const SECTION = 'cudaLlm';
export const STRING_KEYS = ['model', 'baseUrl', 'arch', 'reasoningEffort', 'strategy', 'launch', 'gpus',
    'cluster', 'std', 'compileCommandsDir', 'captureCwd'] as const;
export const NUMBER_KEYS = ['rounds', 'candidates', 'debounceMs', 'maxTokens', 'compileTimeoutS',
    'repairs'] as const;
/** Numbers forwarded as they are (not truncated to integers). */
export const FRACTION_KEYS = ['temperature'] as const;
export const LIST_KEYS = ['includePaths', 'defines', 'nvrtcFlags', 'captureCommand'] as const;
/** Switches, always sent (false too): the server keeps a value it is not sent. */
export const BOOLEAN_KEYS = ['demo'] as const;
/** Switches on by default in a trusted workspace and off in Restricted Mode, whatever is set. */
export const TRUSTED_ONLY_KEYS = ['persistentPch'] as const;
/** Every setting forwarded to the server (the rest, `server.*` and `trace.*`, stay in the client). */
export const FORWARDED_KEYS: readonly string[] = [...STRING_KEYS, ...NUMBER_KEYS, ...FRACTION_KEYS, ...LIST_KEYS,
    ...BOOLEAN_KEYS, ...TRUSTED_ONLY_KEYS];
/** Settings that change how the server is started: a change needs a restart. */
export const LAUNCH_KEYS: readonly string[] = ['server.python', 'server.command', 'server.evaluator'];
/**
 * Launch settings never taken from a workspace's settings (machine scope): a cloned repository
 * must not choose the program that runs.
 */
export const MACHINE_KEYS: readonly string[] = ['server.python', 'server.command'];
/** Also ignored from workspace settings in Restricted Mode (`restrictedConfigurations`). */
export const RESTRICTED_KEYS: readonly string[] = [...MACHINE_KEYS, 'server.evaluator'];

/**
 * Server settings a workspace may not set in Restricted Mode: include paths (any directory),
 * raw NVRTC options, the endpoint the key goes to, the cluster that runs code, the directory whose
 * compile_commands.json names include directories, the program the capture actions run.
 */
export const RESTRICTED_SERVER_KEYS: readonly string[] = ['includePaths', 'nvrtcFlags', 'baseUrl', 'cluster',
    'compileCommandsDir', 'captureCommand', 'captureCwd'];

/** What `WorkspaceConfiguration.inspect` gives (the parts read here). */
export interface InspectedValue<T> {
    readonly defaultValue?: T;
    readonly globalValue?: T;
    readonly workspaceValue?: T;
    readonly workspaceFolderValue?: T;
}

/** A reader that can tell user values from workspace ones (vscode.WorkspaceConfiguration). */
export interface TrustReader extends ConfigReader {
    inspect?<T>(key: string): InspectedValue<T> | undefined;
}

/**
 * `config` as an untrusted workspace may use it: restricted keys from user settings (or their
 * defaults) only. A reader that cannot inspect gives nothing for them: safe, not silent (the
 * caller logs `ignoredWorkspaceSettings`).
 */
export function trustedReader(config: TrustReader, trusted: boolean): ConfigReader {
    if (trusted) {
        return config;
    }
    return {
        get: <T>(key: string): T | undefined => {
            if (!RESTRICTED_SERVER_KEYS.includes(key)) {
                return config.get<T>(key);
            }
            if (typeof config.inspect !== 'function') {
                return undefined;
            }
            const seen = config.inspect<T>(key);
            return seen?.globalValue ?? seen?.defaultValue;
        },
    };
}

/** The restricted settings whose workspace values are ignored now (to say so in the log). */
export function ignoredWorkspaceSettings(config: TrustReader, trusted: boolean): string[] {
    if (trusted || typeof config.inspect !== 'function') {
        return [];
    }
    return RESTRICTED_SERVER_KEYS.filter((key) => {
        const seen = config.inspect?.<unknown>(key);
        return seen?.workspaceValue !== undefined || seen?.workspaceFolderValue !== undefined;
    }).map((key) => `${SECTION}.${key}`);
}

/** `${workspaceFolder}`, `${userHome}` and a leading `~` expanded; unknown variables left as they are. */
export function expandVariables(value: string, vars: PathVariables): string {
    let out = value;
    if (vars.home !== undefined && (out === '~' || out.startsWith('~/'))) {
        out = vars.home + out.slice(1);
    }
    return out.replace(/\$\{(workspaceFolder|userHome)\}/g, (whole, name: string) => {
        const v = name === 'workspaceFolder' ? vars.workspaceFolder : vars.home;
        return v ?? whole;
    });
}

/**
 * The server's view of the settings. Unset or blank values are left out so the server falls back
 * to its own defaults and the environment (OPENAI_BASE_URL, CUDA_LLM_MODEL). Values of the wrong
 * type are left out too; the server validates ranges and reports problems itself.
 */
export function serverSettings(
    raw: TrustReader,
    apiKey?: string,
    vars: PathVariables = {},
    trusted = true,
): ServerSettings {
    const config = trustedReader(raw, trusted);
    const out: ServerSettings = {};
    for (const key of STRING_KEYS) {
        const v = config.get<unknown>(key);
        if (typeof v === 'string' && v.trim() !== '') {
            out[key] = v.trim();
        }
    }
    for (const key of NUMBER_KEYS) {
        const v = config.get<unknown>(key);
        if (typeof v === 'number' && Number.isFinite(v)) {
            out[key] = Math.trunc(v);
        }
    }
    for (const key of FRACTION_KEYS) {
        const v = config.get<unknown>(key);
        if (typeof v === 'number' && Number.isFinite(v)) {
            out[key] = v;
        }
    }
    for (const key of LIST_KEYS) {
        const v = config.get<unknown>(key);
        const list = typeof v === 'string' ? [v] : Array.isArray(v) ? v : [];
        const strings = list.filter((x): x is string => typeof x === 'string' && x.trim() !== '');
        if (strings.length > 0 || Array.isArray(v)) {
            out[key] = key === 'includePaths' ? strings.map((p) => expandVariables(p.trim(), vars)) : strings;
        }
    }
    for (const key of BOOLEAN_KEYS) {
        const v = config.get<unknown>(key);
        if (typeof v === 'boolean') {
            out[key] = v;
        }
    }
    for (const key of TRUSTED_ONLY_KEYS) {
        const v = raw.get<unknown>(key);
        out[key] = trusted && (typeof v === 'boolean' ? v : true);
    }
    if (apiKey !== undefined && apiKey !== '') {
        out.apiKey = apiKey;
    }
    return out;
}

/**
 * `initializationOptions`: the settings under `cudaLlm`, the key also at the top level, and
 * whether the workspace is trusted.
 */
export function initializationOptions(
    config: TrustReader,
    apiKey?: string,
    vars: PathVariables = {},
    trusted = true,
): { cudaLlm: ServerSettings; apiKey?: string; workspaceTrusted: boolean } {
    const settings = serverSettings(config, apiKey, vars, trusted);
    return settings.apiKey === undefined
        ? { cudaLlm: settings, workspaceTrusted: trusted }
        : { cudaLlm: settings, apiKey: settings.apiKey, workspaceTrusted: trusted };
}

/**
 * `workspace/didChangeConfiguration` params carrying the full current settings (never the key)
 * and the workspace's trust.
 */
export function didChangeConfigurationParams(
    config: TrustReader,
    vars: PathVariables = {},
    trusted = true,
): { settings: { cudaLlm: ServerSettings; workspaceTrusted: boolean } } {
    return { settings: { cudaLlm: serverSettings(config, undefined, vars, trusted), workspaceTrusted: trusted } };
}

export interface ConfigurationItemLike {
    readonly section?: string;
    readonly scopeUri?: string;
}

/**
 * The answer to `workspace/configuration`: items asking for `cudaLlm` get the server's view (not
 * VS Code's raw section with the client-only `server.*` keys); `cudaLlm.<key>` gets that one value;
 * anything else keeps `fallback` (VS Code's own answer). The key is never part of it.
 */
export function configurationAnswer(
    items: readonly ConfigurationItemLike[],
    configFor: (scopeUri?: string) => TrustReader,
    fallback: readonly unknown[],
    vars: PathVariables = {},
    trusted = true,
): unknown[] {
    return items.map((item, i) => {
        if (item.section === SECTION) {
            return serverSettings(configFor(item.scopeUri), undefined, vars, trusted);
        }
        if (item.section?.startsWith(`${SECTION}.`)) {
            const key = item.section.slice(SECTION.length + 1);
            if (FORWARDED_KEYS.includes(key)) {
                const all = serverSettings(configFor(item.scopeUri), undefined, vars, trusted) as Record<string, unknown>;
                return all[key] ?? null;
            }
        }
        return fallback[i] ?? null;
    });
}

/** Which kind of reaction a settings change needs (`trace.server` is handled by the client library). */
export function changeKind(affects: (key: string) => boolean): 'restart' | 'forward' | 'none' {
    if (LAUNCH_KEYS.some((k) => affects(`${SECTION}.${k}`))) {
        return 'restart';
    }
    if (FORWARDED_KEYS.some((k) => affects(`${SECTION}.${k}`))) {
        return 'forward';
    }
    return 'none';
}
