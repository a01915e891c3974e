// Text inputs that keep what the user types while focused, even when the panel renders a stale (deferred) value.
import { useState, type ChangeEvent, type FocusEvent, type InputHTMLAttributes, type TextareaHTMLAttributes } from "react";

/**
 * The value to show in a text field: the field's own text while it has focus, else ``value``.
 *
 * The side panel renders a deferred copy of the builder state, so while typing fast the
 * ``value`` prop can be a few keystrokes behind; a field controlled by it would be reset to
 * the stale text and drop keystrokes. Returns the text to show and the focus, blur and
 * change updates of the field's own text.
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

type TextElement = HTMLInputElement | HTMLTextAreaElement;

/** The value and handlers that make an ``<input>`` or ``<textarea>`` keep its own text while focused. */
function useLocalTextProps<E extends TextElement>(
  value: string,
  onText: (text: string) => void,
  onFocus?: (e: FocusEvent<E>) => void,
  onBlur?: (e: FocusEvent<E>) => void,
) {
  const t = useLocalText(value);
  return {
    value: t.shown,
    onFocus: (e: FocusEvent<E>) => {
      t.focus();
      onFocus?.(e);
    },
    onBlur: (e: FocusEvent<E>) => {
      t.blur();
      onBlur?.(e);
    },
    onChange: (e: ChangeEvent<E>) => {
      t.set(e.target.value);
      onText(e.target.value);
    },
  };
}

type InputProps = Omit<InputHTMLAttributes<HTMLInputElement>, "value" | "onChange"> & { value: string; onText(text: string): void };

/** A text ``<input>`` whose text is its own while focused; ``onText`` gets every change. */
export function LocalInput({ value, onText, onFocus, onBlur, ...rest }: InputProps) {
  return <input {...rest} {...useLocalTextProps(value, onText, onFocus, onBlur)} />;
}

type AreaProps = Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, "value" | "onChange"> & { value: string; onText(text: string): void };

/** A ``<textarea>`` whose text is its own while focused; ``onText`` gets every change. */
export function LocalTextarea({ value, onText, onFocus, onBlur, ...rest }: AreaProps) {
  return <textarea {...rest} {...useLocalTextProps(value, onText, onFocus, onBlur)} />;
}

type NumberProps = Omit<InputProps, "value" | "onText" | "type"> & { value: unknown; onNumber(value: number | undefined): void };

/**
 * A number ``<input>`` (a LocalInput) for an optional number: ``value`` shows when it is a
 * number; ``onNumber`` gets the typed number, or undefined when the box is emptied; text
 * that is not a finite number changes nothing.
 */
export function LocalNumberInput({ value, onNumber, ...rest }: NumberProps) {
  return (
    <LocalInput {...rest} type="number" value={typeof value === "number" ? String(value) : ""}
      onText={(t) => {
        if (t.trim() === "") return onNumber(undefined);
        const n = Number(t);
        if (Number.isFinite(n)) onNumber(n);
      }} />
  );
}
