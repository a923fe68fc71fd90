// A turn's text as it is sent, its words as `words` events time them, each word lit while it is heard.
export class Transcript {
  constructor(element) {
    this.element = element;
    this.clear();
  }

  clear() {
    this.text = "";
    this.words = [];      // {start, end, from, to, span}: seconds from the context's first sample, chars of the text
    this.lit = [];        // indices of the words in the order they lit up
    this.element.replaceChildren();
  }

  append(piece) {
    this.text += piece;
    this.render();
  }

  addWords(event) {
    event.words.forEach((_, i) => this.words.push({
      start: event.start[i], end: event.end[i], from: event.char_start[i], to: event.char_end[i],
    }));
    this.render();
  }

  render() {
    const nodes = [];
    let at = 0;
    for (const word of this.words) {
      nodes.push(this.text.slice(at, word.from));
      word.span ??= document.createElement("span");
      word.span.textContent = this.text.slice(word.from, word.to);
      nodes.push(word.span);
      at = word.to;
    }
    const untimed = document.createElement("span");    // sent, but not timed yet
    untimed.className = "untimed";
    untimed.textContent = this.text.slice(at);
    this.element.replaceChildren(...nodes, untimed);
  }

  // seconds heard: the words before are spoken, the word under it is lit
  highlight(seconds) {
    this.words.forEach((word, i) => {
      const lit = word.start <= seconds && seconds < word.end;
      if (lit && !word.wasLit) this.lit.push(i);
      word.wasLit ||= lit;
      word.span.classList.toggle("lit", lit);
      word.span.classList.toggle("spoken", word.end <= seconds);
    });
  }
}
