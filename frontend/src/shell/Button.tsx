// The app's one button system: <Button> (a <button>) and <ButtonLink> (an <a> that looks like one), with a variant, a size and an icon-only form, drawn by the .btn rules in styles/app.css.
import type { AnchorHTMLAttributes, ButtonHTMLAttributes } from "react";

/** How a button looks: ``primary`` for the page's main action, ``danger`` for a destructive one, ``ghost`` for a quiet one, ``link`` for an action drawn as a text link (in a sentence or a list). */
export type ButtonVariant = "default" | "primary" | "danger" | "danger-ghost" | "ghost" | "link";
/** ``small``: 28 px high (table rows, toolbars); ``normal``: 34 px. */
export type ButtonSize = "normal" | "small";

/**
 * The class list of a button (or of anything else drawn as one): ``btn``, the variant's and the
 * size's classes, ``btn-icon`` when ``icon`` (a square holding one glyph), then ``extra``.
 */
export function buttonClass(variant: ButtonVariant = "default", size: ButtonSize = "normal", extra = "", icon = false): string {
  return ["btn", variant === "default" ? "" : `btn-${variant}`, size === "small" ? "btn-small" : "", icon ? "btn-icon" : "", extra]
    .filter(Boolean).join(" ");
}

interface Look {
  variant?: ButtonVariant;
  size?: ButtonSize;
}

/**
 * An icon-only button shows one glyph (×, ✕), so its accessible name must come from
 * ``aria-label``: the type makes the label required whenever ``icon`` is set.
 */
type IconOnly = { icon: true; "aria-label": string } | { icon?: false };

export type ButtonProps = ButtonHTMLAttributes<HTMLButtonElement> & Look & IconOnly & {
  /** React 19 passes ``ref`` as a prop. */
  ref?: React.Ref<HTMLButtonElement>;
};

/** A ``<button>`` (``type="button"`` unless told otherwise, so it never submits a form by accident) in the app's style. */
export function Button({ variant = "default", size = "normal", icon = false, className = "", type = "button", ...rest }: ButtonProps) {
  return <button type={type} className={buttonClass(variant, size, className, icon)} {...rest} />;
}

export type ButtonLinkProps = AnchorHTMLAttributes<HTMLAnchorElement> & Look & IconOnly & {
  /** Where it goes (a link without one is not a link: use <Button>). */
  href: string;
  ref?: React.Ref<HTMLAnchorElement>;
};

/**
 * An ``<a href>`` drawn as a button: for navigation and downloads (Export, Go to home), which
 * must stay links so that middle-click, "copy link" and ``download`` work.
 */
export function ButtonLink({ variant = "default", size = "normal", icon = false, className = "", ...rest }: ButtonLinkProps) {
  return <a className={buttonClass(variant, size, className, icon)} {...rest} />;
}
