import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { REDACTED, RedactingSink, Redactor, TextSink, redactText } from '../../src/common/log';

const KEY = 'my-very-secret-key-123';

describe('redaction', () => {
    it('removes a known secret wherever it appears', () => {
        const out = redactText(`[Trace] Sending request 'initialize' {"initializationOptions": {"cudaLlm": {"k": "${KEY}"}}} and ${KEY}`, [KEY]);
        assert.ok(!out.includes(KEY));
        assert.equal(out.split(REDACTED).length, 3);
    });

    it('removes key fields, bearer tokens and sk- keys it was not told about', () => {
        const text = [
            '"apiKey": "abc\\"def"',
            'OPENAI_API_KEY=xyz123',
            'api_key: hunter2',
            'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload',
            'using sk-proj-ABCDEFGHIJKLMNOPQRSTUV',
        ].join('\n');
        const out = redactText(text);
        for (const secret of ['abc', 'xyz123', 'hunter2', 'eyJhbGciOiJIUzI1NiJ9', 'sk-proj-ABCDEFGHIJKLMNOPQRSTUV']) {
            assert.ok(!out.includes(secret), `${secret} leaked: ${out}`);
        }
        assert.match(out, /"apiKey": "<redacted>"/);
    });

    it('leaves ordinary log lines alone, and does not shred text for a one-letter key', () => {
        const line = '[Info] compiled saxpy: 32 registers, 0 spills, best 1.8×';
        assert.equal(redactText(line, ['a']), line);
    });

    it('keeps hiding a replaced key, since an old server may still print it', () => {
        const r = new Redactor();
        r.addSecret(KEY);
        assert.ok(!r.redact(KEY).includes(KEY));
        r.addSecret('another-secret-value');
        r.addSecret(undefined);
        r.addSecret('');
        assert.equal(r.redact(`${KEY} another-secret-value`), `${REDACTED} ${REDACTED}`);
        assert.equal(r.redact('plain text'), 'plain text');
    });
});

class Memory implements TextSink {
    text = '';
    append(value: string): void {
        this.text += value;
    }
    appendLine(value: string): void {
        this.text += `${value}\n`;
    }
    replace(value: string): void {
        this.text = value;
    }
}

describe('redacting sink', () => {
    it('catches a secret split across two chunks of output', () => {
        const memory = new Memory();
        const r = new Redactor();
        r.addSecret(KEY);
        const sink = new RedactingSink(memory, r, 10_000);
        const read = (): string => memory.text;
        sink.append(`server: key ${KEY.slice(0, 8)}`);
        sink.append(`${KEY.slice(8)} loaded\nnext`);
        assert.equal(read(), `server: key ${REDACTED} loaded\n`);
        sink.flush();
        assert.equal(read(), `server: key ${REDACTED} loaded\nnext`);
        sink.appendLine(`apiKey=${KEY}`);
        assert.ok(!read().includes(KEY));
        sink.replace(`only ${KEY}`);
        assert.equal(read(), `only ${REDACTED}`);
    });

    it('writes a partial line after a short wait', async () => {
        const memory = new Memory();
        const sink = new RedactingSink(memory, new Redactor(), 20);
        const read = (): string => memory.text;
        sink.append('prompt> ');
        assert.equal(read(), '');
        await new Promise((resolve) => setTimeout(resolve, 80));
        assert.equal(read(), 'prompt> ');
    });
});
