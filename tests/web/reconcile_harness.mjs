// Runs reconcile vectors through beebox_impl/web/reconcile.js (tests/web/test_reconcile_js.py).
//
// stdin: {"module": "<file URL of reconcile.js>", "kind": "reconcile/…", "inputs": [input, …]}
// stdout: [answer, …], each answer shaped as the conformance handlers shape the spec's
// (conformance/targets/spec_reconcile.py): uuids, so the vectors' `expect` compares as is.

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const reconcile = await import(request.module);

const uuids = (entries) => entries.map((entry) => entry.uuid);

const handlers = {
  "reconcile/pending": (input) => {
    const result = reconcile.reconcilePending(input.serverMessages, input.pendingMessages);
    return { messages: uuids(result.messages), pendingMessages: uuids(result.pendingMessages) };
  },
  "reconcile/merge-accepted": (input) =>
    uuids(reconcile.mergeAcceptedIntoPending(input.pendingMessages, input.accepted)),
};

const handler = handlers[request.kind];
if (handler === undefined) {
  process.stderr.write(`no handler for ${request.kind}\n`);
  process.exit(2);
}
process.stdout.write(JSON.stringify(request.inputs.map(handler)));
