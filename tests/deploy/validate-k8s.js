#!/usr/bin/env node
// Validates Kubernetes objects (multi-document YAML, as `kubectl kustomize`
// prints them) against the Kubernetes OpenAPI schema, offline, with the
// kubernetes-models package: its per-kind validators (generated from the
// OpenAPI schema, run by @kubernetes-models/validate) check types, required
// fields and formats; its type declarations give the fields each kind
// declares, so unknown (misspelt) fields are refused too.
//   YIRAGE_DEPLOY_TOOLS=build/deploy-tools node validate-k8s.js FILE.yaml...
// (YIRAGE_DEPLOY_TOOLS: the folder of scripts/install-deploy-tools.sh; else
// the packages are looked up the usual way.) Prints one line an object;
// exits 1 when any object is invalid or of an apiVersion/kind the schema does
// not have, 2 on a usage or parse error.
'use strict';
const fs = require('fs');
const path = require('path');

const modules = process.env.YIRAGE_DEPLOY_TOOLS
  ? path.join(process.env.YIRAGE_DEPLOY_TOOLS, 'node_modules')
  : '';
function load(name) {
  return require(modules ? require.resolve(name, { paths: [modules] }) : name);
}
const yaml = load('js-yaml');

// apiVersion -> the kubernetes-models module of its group and version:
// "v1" -> kubernetes-models/v1, "apps/v1" -> kubernetes-models/apps/v1.
function modelClass(apiVersion, kind) {
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return null;
  if (!/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion)) return null;
  let mod;
  try {
    mod = load(`kubernetes-models/${apiVersion}`);
  } catch (e) {
    return null;
  }
  return Object.prototype.hasOwnProperty.call(mod, kind) ? mod[kind] : null;
}

// The schema's validators accept fields they do not know (the generated
// schemas leave additionalProperties open), so unknown fields (a misspelt
// `readinesProbe`) are found from the same package's type declarations:
// each model's .d.ts declares its interface's fields and their types.
const interfaces = new Map();  // .d.ts path -> {fields: Map(name -> type)} or null
function packageDir(name) {
  const paths = modules ? [modules] : undefined;
  return path.dirname(require.resolve(`${name}/package.json`, paths ? { paths } : undefined));
}
function resolveImport(fromFile, spec) {
  if (spec.startsWith('.')) return path.resolve(path.dirname(fromFile), `${spec}.d.ts`);
  const parts = spec.split('/');
  const pkg = spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  const rest = parts.slice(spec.startsWith('@') ? 2 : 1).join('/');
  return path.join(packageDir(pkg), `${rest}.d.ts`);
}
function parseInterface(file) {
  if (interfaces.has(file)) return interfaces.get(file);
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    interfaces.set(file, null);
    return null;
  }
  const imports = new Map();
  for (const m of text.matchAll(/^import \{ (\w+) \} from "([^"]+)";$/gm)) {
    imports.set(m[1], resolveImport(file, m[2]));
  }
  const lines = text.replace(/\/\*\*[\s\S]*?\*\//g, '').split('\n');
  const start = lines.findIndex((l) => /^export interface \w+/.test(l));
  if (start < 0) {
    interfaces.set(file, null);  // a type alias (IntOrString, Quantity, Time): a leaf
    return null;
  }
  const fields = new Map();
  for (let i = start + 1; i < lines.length && lines[i] !== '}'; i++) {
    const m = /^ {4}"([^"]+)"\??: (.*)$/.exec(lines[i]);
    if (!m) continue;
    let type = m[2];
    while (!/;$/.test(type.trim()) || /^\{/.test(type.trim()) && !/^ {4}\S/.test(lines[i])) {
      if (++i >= lines.length) break;
      type += ' ' + lines[i].trim();
      if (/^ {4}\S.*;$/.test(lines[i])) break;
    }
    fields.set(m[1], type.replace(/\s+/g, ' ').replace(/;$/, '').trim());
  }
  const parsed = { fields, imports };
  interfaces.set(file, parsed);
  return parsed;
}
// Appends "path: unknown field" for every field of `value` that the type
// (as written in `iface`'s declarations) does not declare.
function unknownFields(value, type, iface, where, out) {
  if (value === null || typeof value !== 'object') return;
  let m;
  if ((m = /^Array<(.+)>$/.exec(type))) {
    if (Array.isArray(value)) value.forEach((v, i) => unknownFields(v, m[1], iface, `${where}[${i}]`, out));
    return;
  }
  if ((m = /^\{ \[key: string\]: (.+); \}$/.exec(type))) {
    for (const [k, v] of Object.entries(value)) unknownFields(v, m[1], iface, `${where}.${k}`, out);
    return;
  }
  if (!iface.imports.has(type)) return;  // a primitive, a union: a leaf
  const next = parseInterface(iface.imports.get(type));
  if (next) checkFields(value, next, where, out);
}
function checkFields(value, iface, where, out) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
  for (const [k, v] of Object.entries(value)) {
    const type = iface.fields.get(k);
    if (type === undefined) {
      out.push(`${where ? where + '.' : ''}${k}: unknown field`);
      continue;
    }
    unknownFields(v, type, iface, `${where ? where + '.' : ''}${k}`, out);
  }
}
function modelDeclarations(apiVersion, kind) {
  return path.join(packageDir('kubernetes-models'), apiVersion, `${kind}.d.ts`);
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: validate-k8s.js FILE.yaml...');
  process.exit(2);
}
let bad = 0;
let count = 0;
for (const file of files) {
  let docs;
  try {
    docs = yaml.loadAll(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    console.error(`${file}: not YAML: ${e.message}`);
    process.exit(2);
  }
  for (const obj of docs) {
    if (obj === null || obj === undefined) continue;  // an empty document
    count++;
    const name = obj.metadata && obj.metadata.name;
    const what = `${file}: ${obj.apiVersion} ${obj.kind} ${name}`;
    const Model = modelClass(obj.apiVersion, obj.kind);
    if (!Model) {
      console.log(`FAIL ${what}: no schema for apiVersion ${obj.apiVersion} kind ${obj.kind}`);
      bad++;
      continue;
    }
    try {
      new Model(obj).validate();
      if (!name) throw new Error('metadata.name is missing');
      const iface = parseInterface(modelDeclarations(obj.apiVersion, obj.kind));
      if (!iface) throw new Error(`no type declarations for ${obj.apiVersion} ${obj.kind}`);
      const unknown = [];
      checkFields(obj, iface, '', unknown);
      if (unknown.length) throw new Error(unknown.join('; '));
      console.log(`ok   ${what}`);
    } catch (e) {
      console.log(`FAIL ${what}: ${e.message}`);
      bad++;
    }
  }
}
console.log(`${count} objects, ${bad} invalid`);
process.exit(bad ? 1 : 0);
