// The playground: a text streamed to the gateway's socket word by word as an LLM writes, its audio played as it
// arrives, its words lit as they are heard, barge-in with what was said, live TTFA and RTF (docs/protocol.md).
import { Player } from "./player.js";
import { Transcript } from "./transcript.js";

const $ = (id) => document.getElementById(id);
const KEEPALIVE_MS = 5000;  // well under --context-timeout: the context stays open while its audio plays
const transcript = new Transcript($("transcript"));
let socket, rate, player, turn = null, turns = 0;

// what the page shows, as data: for tests (tests/test_playground.py) and the curious
const state = window.playground = { ready: false, sent: "", samples: 0, played: 0, lit: [], ttfaMs: null, rtf: null,
                                    cancelled: null, done: null, error: null };

function show(text, isError = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", isError);
}

function fill(select, values) {
  const kept = select.value;
  select.replaceChildren(...values.map((value) => new Option(value)));
  if (values.includes(kept)) select.value = kept;
}

function connect() {
  if (turn) finish("reconnected");
  socket?.close();
  const url = new URL("v1/tts/websocket", location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.search = new URLSearchParams({ sample_rate: $("sample-rate").value });
  if ($("api-key").value) url.searchParams.set("api_key", $("api-key").value);
  const ws = socket = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  ws.onmessage = ({ data }) => typeof data === "string" ? receive(JSON.parse(data)) : play(new DataView(data));
  ws.onclose = ({ code }) => {
    if (ws !== socket) return;
    state.ready = false;
    $("speak").disabled = true;
    if (turn) finish();
    if (code === 1013) setTimeout(connect, 1000);      // not ready yet, or busy: try again
    else if (!state.error) show(`disconnected (${code})`, true);
  };
}

const send = (message) => socket.send(JSON.stringify(message));

async function speak() {
  const pieces = $("text").value.trim().match(/\s*\S+/g);
  if (!pieces) return show("type some text first");
  player ??= new Player();
  await player.context.resume();
  player.reset();
  transcript.clear();
  $("split").hidden = true;
  Object.assign(state, { ttfaMs: null, rtf: null, cancelled: null, done: null, error: null });
  const id = `turn-${++turns}`;
  const current = turn = { id, flushed: false, stopped: false, sentAt: 0, firstAudioAt: 0, firstSamples: 0 };
  current.keepalive = setInterval(() => send({ type: "keepalive", context_id: id }), KEEPALIVE_MS);
  $("speak").disabled = true;
  $("barge-in").disabled = false;
  const settings = { voice: $("voice").value || undefined, language: $("language").value,
                     instruct: $("instruct-field").hidden ? undefined : $("instruct").value || undefined };
  for (const [i, piece] of pieces.entries()) {
    if (current.stopped) return;
    send({ type: "text", context_id: id, text: piece, ...(i === 0 ? settings : {}) });
    current.sentAt ||= performance.now();
    transcript.append(piece);
    await new Promise((resolve) => setTimeout(resolve, Number($("pace").value)));
  }
  // flush, not end: the context stays open while its audio plays, so that a barge-in still gets `cancelled`
  if (!current.stopped) send({ type: "flush", context_id: id });
}

function play(frame) {      // a binary audio frame: u8 version, u8 id length, id, u32 seq, u32 sample_offset, PCM
  const idLength = frame.getUint8(1);
  const id = new TextDecoder().decode(new Uint8Array(frame.buffer, 2, idLength));
  if (!turn || turn.stopped || id !== turn.id) return;
  const offset = frame.getUint32(6 + idLength, true);
  player.play(new Int16Array(frame.buffer.slice(10 + idLength)), offset, rate);
  const now = performance.now();
  if (!turn.firstAudioAt) {
    turn.firstAudioAt = now;
    turn.firstSamples = player.samples;
    state.ttfaMs = Math.round(now - turn.sentAt);
    $("ttfa").value = state.ttfaMs;
  } else {       // arrival time over the audio's duration, both after the first chunk: below 1 it keeps ahead
    state.rtf = (now - turn.firstAudioAt) / 1000 / ((player.samples - turn.firstSamples) / rate);
    $("rtf").value = state.rtf.toFixed(3);
  }
}

function receive(message) {
  const ours = turn && message.context_id === turn.id;
  if (message.type === "ready") {
    rate = message.sample_rate;
    fill($("voice"), message.voices);
    $("voice").parentElement.hidden = !message.voices.length;
    Object.assign(state, { ready: true, error: null });
    $("speak").disabled = false;
    show("ready");
    describeModel();
  } else if (message.type === "words" && ours) {
    transcript.addWords(message);
  } else if (message.type === "flushed" && ours) {
    turn.flushed = true;
  } else if (message.type === "done" && ours) {
    state.done = message;
    finish(`done: ${(message.audio_ms / 1000).toFixed(2)} s of audio`);
  } else if (message.type === "cancelled" && ours) {
    state.cancelled = message;
    showSplit(message);
    finish(`cancelled at ${(message.played_ms / 1000).toFixed(2)} s`);
  } else if (message.type === "error") {
    refused(message, ours);
  }
}

function refused(error, ours) {
  if (ours && error.code === "alignment_unavailable") return show("word timestamps unavailable: the audio goes on");
  state.error = error;
  if (error.code === "unauthorized") $("key-field").hidden = false;
  if (ours) finish();
  show(`${error.code}: ${error.message}`, true);
}

async function describeModel() {
  const info = await (await fetch("health")).json();
  fill($("language"), info.languages ?? ["auto"]);
  $("instruct-field").hidden = !info.takes_instruct;
  $("model").textContent = `playground · ${info.model}`;
}

function bargeIn() {
  const played_ms = Math.round(player.played() * 1000);    // what the listener heard, by the audio clock
  player.stop();
  turn.stopped = true;
  send({ type: "cancel", context_id: turn.id, played_ms });
  $("barge-in").disabled = true;
}

function showSplit({ spoken_text, unspoken_text }) {
  const known = spoken_text !== null;
  document.querySelector("#split .spoken").textContent = known ? spoken_text : "";
  document.querySelector("#split .unspoken").textContent = known ? unspoken_text : "";
  document.querySelector("#split .note").textContent = known ? "" : "no word timestamps for this turn (no aligner?)";
  $("split").hidden = false;
}

function finish(text) {
  turn.stopped = true;
  clearInterval(turn.keepalive);
  player.stop();
  turn = null;
  $("speak").disabled = !state.ready;
  $("barge-in").disabled = true;
  if (text) show(text);
}

function tick() {
  if (player) {
    Object.assign(state, { played: player.played(), samples: player.samples });
    transcript.highlight(state.played);
    $("played").value = state.played.toFixed(2);
    if (turn?.flushed && player.finished) {     // heard to its end: now the context ends
      turn.flushed = false;
      send({ type: "end", context_id: turn.id });
    }
  }
  Object.assign(state, { sent: transcript.text, lit: transcript.lit });
  requestAnimationFrame(tick);
}

$("api-key").value = new URLSearchParams(location.search).get("api_key") ?? "";
$("key-field").hidden = !$("api-key").value;
$("sample-rate").onchange = $("api-key").onchange = connect;
$("speak").onclick = speak;
$("barge-in").onclick = bargeIn;
connect();
tick();
