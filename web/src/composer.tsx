// The message box under a chat: it grows with its text (up to a third of the screen, then
// scrolls), keeps the focus after a send, and sends on Enter (Shift+Enter is a new line). While
// the chat is busy a message is queued, and Interrupt (or Esc, anywhere) stops the turn.

import { useEffect, useLayoutEffect, useRef, type KeyboardEvent } from "react";

/** Whether this is a pointer device (a phone's keyboard should not pop up by itself). */
const finePointer = () => window.matchMedia("(pointer: fine)").matches;

export function Composer(p: {
  draft: string;
  setDraft: (s: string) => void;
  busy: boolean;
  onSend: () => Promise<boolean>;
  onInterrupt: () => void;
}) {
  const box = useRef<HTMLTextAreaElement>(null);
  useEffect(() => {
    if (finePointer()) box.current?.focus();
  }, []);
  // Its height follows its text.
  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight + 2, Math.round(window.innerHeight / 3))}px`;
  }, [p.draft]);
  const send = async () => {
    if (await p.onSend()) box.current?.focus();
  };
  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void send();
    }
  };
  return (
    <div className="composer">
      <textarea
        ref={box}
        aria-label="Message"
        placeholder={p.busy ? "Busy: a message now is queued (Esc interrupts)" : "Message"}
        value={p.draft}
        onChange={(e) => p.setDraft(e.target.value)}
        onKeyDown={onKey}
        rows={2}
      />
      <div className="composer-buttons">
        {/* Its width is the column's (Interrupt's), so a new label moves nothing: keyed, it
            is a new word in place, not the old one shifted. */}
        <button
          onMouseDown={(e) => e.preventDefault()} // the focus stays in the box
          onClick={() => void send()}
          disabled={p.draft.trim() === ""}
        >
          <span key={p.busy ? "queue" : "send"}>{p.busy ? "Queue" : "Send"}</span>
        </button>
        <button
          className="danger"
          onMouseDown={(e) => e.preventDefault()}
          onClick={p.onInterrupt}
          disabled={!p.busy}
          title="Interrupt (Esc)"
        >
          Interrupt
        </button>
      </div>
    </div>
  );
}
