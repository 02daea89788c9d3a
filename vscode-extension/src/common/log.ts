/**
 * Secrets out of everything the extension writes to its output channels.
 *
 * Server stderr, trace output (which echoes `initializationOptions` and configuration answers) and
 * our own messages all pass through `Redactor.redact` before they reach a channel.
 */

export const REDACTED = '<redacted>';

/** Key-like fields in JSON or key=value text, `Bearer` tokens and OpenAI-style `sk-` keys. */
const PATTERNS: readonly RegExp[] = [
    /("(?:apiKey|api_key|OPENAI_API_KEY|authorization)"\s*:\s*")((?:[^"\\]|\\.)*)(")/gi,
    /\b((?:apiKey|api_key|OPENAI_API_KEY)\s*[=:]\s*)([^\s,;"'}]+)()/gi,
    /\b(Bearer\s+)([A-Za-z0-9._~+/=-]{8,})()/g,
    /()\b(sk-[A-Za-z0-9_-]{16,})()/g,
];

/** Literal secrets shorter than this are only caught by the patterns (a one-letter "key" would garble the log). */
export const MIN_SECRET_LENGTH = 6;

export function redactText(text: string, secrets: Iterable<string> = []): string {
    let out = text;
    for (const secret of secrets) {
        if (secret.length >= MIN_SECRET_LENGTH) {
            out = out.split(secret).join(REDACTED);
            const escaped = JSON.stringify(secret).slice(1, -1);
            if (escaped !== secret) {
                out = out.split(escaped).join(REDACTED);
            }
        }
    }
    for (const pattern of PATTERNS) {
        out = out.replace(pattern, (_m, pre: string, _secret: string, post: string) => `${pre}${REDACTED}${post}`);
    }
    return out;
}

/**
 * Holds the secrets to hide: the API key from SecretStorage and every earlier value of it this
 * session (a server started with the old key may still print it while it shuts down).
 */
export class Redactor {
    private readonly secrets = new Set<string>();

    addSecret(value: string | undefined): void {
        if (value !== undefined && value !== '') {
            this.secrets.add(value);
        }
    }

    redact(text: string): string {
        return redactText(text, this.secrets);
    }
}

/** The part of an output channel we write to (vscode.OutputChannel satisfies it). */
export interface TextSink {
    append(value: string): void;
    appendLine(value: string): void;
    replace(value: string): void;
}

/**
 * A sink that redacts before writing. `append` is buffered up to the next newline so a secret
 * split across two chunks of server stderr is still caught.
 */
export class RedactingSink implements TextSink {
    private pending = '';
    private timer: ReturnType<typeof setTimeout> | undefined;

    constructor(
        private readonly target: TextSink,
        private readonly redactor: Redactor,
        /** How long a partial line waits for its end before it is written anyway. */
        private readonly partialLineMs = 250,
    ) {}

    append(value: string): void {
        this.pending += value;
        const cut = this.pending.lastIndexOf('\n');
        if (cut >= 0) {
            this.target.append(this.redactor.redact(this.pending.slice(0, cut + 1)));
            this.pending = this.pending.slice(cut + 1);
        }
        if (this.pending.length > 64 * 1024) {
            this.flush();
        } else if (this.pending !== '' && this.timer === undefined) {
            this.timer = setTimeout(() => this.flush(), this.partialLineMs);
        }
    }

    appendLine(value: string): void {
        this.append(`${value}\n`);
    }

    replace(value: string): void {
        this.flush();
        this.target.replace(this.redactor.redact(value));
    }

    flush(): void {
        if (this.timer !== undefined) {
            clearTimeout(this.timer);
            this.timer = undefined;
        }
        if (this.pending !== '') {
            this.target.append(this.redactor.redact(this.pending));
            this.pending = '';
        }
    }
}
