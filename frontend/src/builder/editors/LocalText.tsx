// Text inputs that keep what the user types while focused, even when the panel renders a stale (deferred) value.
import { useState, type InputHTMLAttributes, type TextareaHTMLAttributes } from "react";

/**
 * The value to show in a text field: the field's own text while it has focus, else ``value``.
 *
 * The side panel renders a deferred copy of the builder state, so while typing fast the
 * ``value`` prop can be a few keystrokes behind; a field controlled by it would be reset to
 * the stale text and drop keystrokes. Returns ``[shown, onFocus, onBlur, setLocal]``.
 */
export function useLocalText(value: string) {
  const [local, setLocal] = useState<string | null>(null);
  const shown = local ?? value;
  return {
    shown,
    focus: () => setLocal(value),
    blur: () => setLocal(null),
    set: (text: string) => setLocal((cur) => (cur === null ? cur : text)),
  };
}

type InputProps = Omit<InputHTMLAttributes<HTMLInputElement>, "value" | "onChange"> & { value: string; onText(text: string): void };

/** A text ``<input>`` whose text is its own while focused; ``onText`` gets every change. */
export function LocalInput({ value, onText, onFocus, onBlur, ...rest }: InputProps) {
  const t = useLocalText(value);
  return (
    <input
      {...rest}
      value={t.shown}
      onFocus={(e) => {
        t.focus();
        onFocus?.(e);
      }}
      onBlur={(e) => {
        t.blur();
        onBlur?.(e);
      }}
      onChange={(e) => {
        t.set(e.target.value);
        onText(e.target.value);
      }}
    />
  );
}

type AreaProps = Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, "value" | "onChange"> & { value: string; onText(text: string): void };

/** A ``<textarea>`` whose text is its own while focused; ``onText`` gets every change. */
export function LocalTextarea({ value, onText, onFocus, onBlur, ...rest }: AreaProps) {
  const t = useLocalText(value);
  return (
    <textarea
      {...rest}
      value={t.shown}
      onFocus={(e) => {
        t.focus();
        onFocus?.(e);
      }}
      onBlur={(e) => {
        t.blur();
        onBlur?.(e);
      }}
      onChange={(e) => {
        t.set(e.target.value);
        onText(e.target.value);
      }}
    />
  );
}
