/**
 * The packaged `.vsix` (`npm run package`): it ships the server wheel that CUDA-LLM:
 * Install/Update Server installs, the icon, and a README without links that break once packaged.
 * Skipped when no `.vsix` has been built (`npm test` does not package).
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { ROOT } from './helpers';

/** The entry names of a zip file, from its central directory. */
export function zipEntries(data: Buffer): string[] {
    let end = data.length - 22;
    while (end >= 0 && data.readUInt32LE(end) !== 0x06054b50) {
        end--;
    }
    assert.ok(end >= 0, 'a zip file');
    const count = data.readUInt16LE(end + 10);
    let at = data.readUInt32LE(end + 16);
    const names: string[] = [];
    for (let i = 0; i < count; i++) {
        assert.equal(data.readUInt32LE(at), 0x02014b50);
        const nameLength = data.readUInt16LE(at + 28);
        const extra = data.readUInt16LE(at + 30);
        const comment = data.readUInt16LE(at + 32);
        names.push(data.toString('utf8', at + 46, at + 46 + nameLength));
        at += 46 + nameLength + extra + comment;
    }
    return names;
}

const MANIFEST = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const VSIX = path.join(ROOT, `${MANIFEST.name}-${MANIFEST.version}.vsix`);

describe('the packaged .vsix', () => {
    it('ships the server wheel, the icon and a README without repository-relative links', { skip: !fs.existsSync(VSIX) && `no ${path.basename(VSIX)} (npm run package)` }, () => {
        const data = fs.readFileSync(VSIX);
        const names = zipEntries(data);
        const wheels = names.filter((n) => /^extension\/server\/cuda_llm_lsp-[^/]+-py3-none-any\.whl$/.test(n));
        assert.equal(wheels.length, 1, names.join('\n'));
        assert.ok(wheels[0].includes(`cuda_llm_lsp-${MANIFEST.version}-`), `the wheel is version ${MANIFEST.version}: ${wheels[0]}`);
        assert.ok(names.includes(`extension/${MANIFEST.icon}`), 'the icon');
        assert.ok(names.includes('extension/dist/extension.js'));
        assert.ok(!names.some((n) => n.startsWith('extension/src/') || n.startsWith('extension/node_modules/')), 'no sources or node_modules');
        const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
        const relative = [...readme.matchAll(/\]\(([^)#]+)\)/g)].map((m) => m[1]).filter((href) => !/^(https?|mailto):/.test(href));
        assert.deepEqual(relative, [], 'links that point outside the .vsix');
    });
});
