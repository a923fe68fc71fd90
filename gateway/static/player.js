// Gapless playback of a context's PCM chunks on the Web Audio clock, and how much of it has been heard.
const LEAD = 0.1;           // seconds between the first chunk's arrival and its playback: room for the next to arrive

export class Player {
  constructor() {
    this.context = new AudioContext();
    this.sources = new Set();
    this.start = null;      // the audio clock's time of the context's first sample
    this.stoppedAt = null;  // what played() answers once stopped
    this.samples = 0;       // the context's samples scheduled so far
    this.rate = 24000;
  }

  reset() {
    this.stop();
    this.start = this.stoppedAt = null;
    this.samples = 0;
  }

  // pcm: Int16Array at `rate`, starting `offset` samples from the context's first sample
  play(pcm, offset, rate) {
    const now = this.context.currentTime;
    this.start ??= now + LEAD;
    let at = this.start + offset / rate;
    if (at < now) {         // the chunk came late: the rest of the stream moves with it
      this.start += now - at;
      at = now;
    }
    const buffer = this.context.createBuffer(1, pcm.length, rate);
    const samples = buffer.getChannelData(0);
    for (let i = 0; i < pcm.length; i++) samples[i] = pcm[i] / 32768;
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    source.onended = () => this.sources.delete(source);
    source.start(at);
    this.sources.add(source);
    this.samples = offset + pcm.length;
    this.rate = rate;
  }

  // seconds of the context's audio that have reached the speakers
  played() {
    if (this.start === null) return 0;
    if (this.stoppedAt !== null) return this.stoppedAt;
    const { contextTime } = this.context.getOutputTimestamp();
    const heard = (contextTime || this.context.currentTime) - this.start;
    return Math.min(Math.max(heard, 0), this.samples / this.rate);
  }

  get finished() {
    return this.start !== null && this.played() >= this.samples / this.rate;
  }

  stop() {
    this.stoppedAt = this.played();
    for (const source of this.sources) source.stop();
    this.sources.clear();
  }
}
