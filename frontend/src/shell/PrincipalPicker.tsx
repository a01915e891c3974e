// A type-ahead picker of users and groups (GET /api/v1/principals/?q=): chosen names as removable chips; stores plain usernames and group names.
import type { Principal, Principals } from "../api/types";
import { useEffect, useId, useRef, useState, type KeyboardEvent } from "react";
import { api } from "../lib/api";
import "./picker.css";

export type PrincipalKind = "user" | "group";

/** How long (ms) typing must pause before the picker asks the server. */
export const PICKER_DEBOUNCE_MS = 150;

/** The server's search: active users and groups whose name contains ``q`` (builders and staff may ask). */
export function searchPrincipals(q: string, kind?: PrincipalKind): Promise<Principal[]> {
  const params = new URLSearchParams({ q });
  if (kind) params.set("kind", kind);
  return api<Principals>(`principals/?${params.toString()}`).then((r) => r.results);
}

export interface PrincipalPickerProps {
  id: string;
  /** Accessible name of the text box (the visible label is the caller's, ``htmlFor={id}``). */
  label: string;
  users: readonly string[];
  groups: readonly string[];
  onChange(users: string[], groups: string[]): void;
  /** Which kinds it offers (default both). */
  kinds?: readonly PrincipalKind[];
  readOnly?: boolean;
  placeholder?: string;
  /** The search (tests pass their own); default: the API's. */
  search?: (q: string, kind?: PrincipalKind) => Promise<Principal[]>;
}

/**
 * Chips for the chosen users and groups, and a combobox that suggests others as you type
 * (arrows move, Enter or a click adds and closes the list, Backspace in an empty box removes the last chip).
 * Nothing is added that the server did not offer, so a typo never becomes an unknown name.
 */
export function PrincipalPicker({ id, label, users, groups, onChange, kinds = ["user", "group"], readOnly, placeholder, search = searchPrincipals }: PrincipalPickerProps) {
  const [text, setText] = useState("");
  const [open, setOpen] = useState(false);
  const [options, setOptions] = useState<Principal[]>([]);
  const [active, setActive] = useState(0);
  const [failed, setFailed] = useState(false);
  const seq = useRef(0);
  const listId = useId();
  const only = kinds.length === 1 ? kinds[0] : undefined;
  // Plain strings as the effect's inputs: callers pass fresh arrays on every render.
  const chosenKey = [...users.map((u) => `user:${u}`), ...groups.map((g) => `group:${g}`)].join("\n");
  const kindsKey = kinds.join(",");

  useEffect(() => {
    if (!open) return;
    const id = ++seq.current;
    const timer = window.setTimeout(() => {
      search(text.trim(), only).then(
        (found) => {
          if (id !== seq.current) return; // a slower, older answer never replaces a newer one
          const chosen = new Set(chosenKey.split("\n"));
          const offered = new Set(kindsKey.split(","));
          setOptions(found.filter((p) => offered.has(p.kind) && !chosen.has(`${p.kind}:${p.name}`)));
          setActive(0);
          setFailed(false);
        },
        () => id === seq.current && setFailed(true),
      );
    }, PICKER_DEBOUNCE_MS);
    return () => window.clearTimeout(timer);
  }, [text, open, search, only, chosenKey, kindsKey]);

  const add = (p: Principal) => {
    if (p.kind === "user") onChange([...users, p.name], [...groups]);
    else onChange([...users], [...groups, p.name]);
    setText("");
    // Closed after each pick, so the list never hides what follows (a dialog's buttons);
    // typing or an arrow key opens it again.
    setOpen(false);
    setOptions((o) => o.filter((x) => x !== p));
  };
  const remove = (kind: PrincipalKind, name: string) => {
    if (kind === "user") onChange(users.filter((u) => u !== name), [...groups]);
    else onChange([...users], groups.filter((g) => g !== name));
  };
  const onKeyDown = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      setOpen(true);
      if (options.length) setActive((a) => (a + (e.key === "ArrowDown" ? 1 : -1) + options.length) % options.length);
    } else if (e.key === "Enter") {
      if (open && options[active]) {
        e.preventDefault();
        add(options[active]);
      }
    } else if (e.key === "Escape") {
      if (open) {
        e.stopPropagation();
        setOpen(false);
      }
    } else if (e.key === "Backspace" && text === "") {
      const lastGroup = groups[groups.length - 1];
      const lastUser = users[users.length - 1];
      if (lastGroup !== undefined) remove("group", lastGroup);
      else if (lastUser !== undefined) remove("user", lastUser);
    }
  };
  const chips = [...users.map((name) => ({ kind: "user" as const, name })), ...groups.map((name) => ({ kind: "group" as const, name }))];
  const showList = open && !readOnly;
  return (
    <div className="picker">
      {chips.length > 0 ? (
        <ul className="picker-chips" aria-label={`${label}: chosen`}>
          {chips.map((c) => (
            <li key={`${c.kind}:${c.name}`} className={`picker-chip picker-chip-${c.kind}`}>
              <span>{c.kind === "group" ? `group ${c.name}` : c.name}</span>
              {readOnly ? null : (
                <button type="button" aria-label={`Remove ${c.kind} ${c.name}`} onClick={() => remove(c.kind, c.name)}>×</button>
              )}
            </li>
          ))}
        </ul>
      ) : readOnly ? <p className="readonly-value">—</p> : null}
      {readOnly ? null : (
        <input
          id={id}
          type="text"
          role="combobox"
          aria-label={label}
          aria-expanded={showList}
          aria-controls={listId}
          aria-autocomplete="list"
          aria-activedescendant={showList && options[active] ? `${listId}-${active}` : undefined}
          autoComplete="off"
          value={text}
          placeholder={placeholder ?? (only === "group" ? "Add a group…" : only === "user" ? "Add a user…" : "Add a user or group…")}
          onChange={(e) => { setText(e.target.value); setOpen(true); }}
          onFocus={() => setOpen(true)}
          onBlur={() => setOpen(false)}
          onKeyDown={onKeyDown}
        />
      )}
      {showList ? (
        <ul className="picker-options" role="listbox" id={listId} aria-label={`${label}: suggestions`}>
          {failed ? <li className="picker-empty">Could not search; try again.</li> : null}
          {!failed && options.length === 0 ? <li className="picker-empty">{text.trim() ? `No user or group matches “${text.trim()}”.` : "Type to search."}</li> : null}
          {options.map((p, i) => (
            <li
              key={`${p.kind}:${p.name}`}
              id={`${listId}-${i}`}
              role="option"
              aria-selected={i === active}
              className="picker-option"
              // mousedown, not click: the input's blur would close the list first.
              onMouseDown={(e) => { e.preventDefault(); add(p); }}
              onMouseEnter={() => setActive(i)}
            >
              <span className="picker-option-kind">{p.kind}</span>
              <span>{p.label}</span>
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}
