// ESLint for the browser app: JavaScript's and typescript-eslint's recommended rules and React's hooks rules.
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import reactHooks from "eslint-plugin-react-hooks";
import globals from "globals";
import tseslint from "typescript-eslint";

export default defineConfig(
  // The build output and the API types openapi-typescript generates (make api-types).
  { ignores: ["dist/", "src/api/schema.d.ts"] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ["**/*.{ts,tsx}"],
    languageOptions: { globals: { ...globals.browser } },
    plugins: { "react-hooks": reactHooks },
    rules: {
      "react-hooks/rules-of-hooks": "error",
      "react-hooks/exhaustive-deps": "error",
      // `const { raw: _raw, ...rest } = x` leaves a key out on purpose.
      "@typescript-eslint/no-unused-vars": ["error", { ignoreRestSiblings: true, argsIgnorePattern: "^_" }],
    },
  },
  // No component module over 400 lines (issue 25): split along its seams instead.
  {
    files: ["src/**/*.tsx"],
    ignores: ["src/**/*.test.tsx"],
    rules: { "max-lines": ["error", { max: 400 }] },
  },
  // One button system (issue 25): a button or a link drawn as one is <Button> or <ButtonLink>
  // (shell/Button.tsx), never a raw element with the .btn classes written by hand.
  {
    files: ["src/**/*.tsx"],
    ignores: ["src/shell/Button.tsx", "src/**/*.test.tsx"],
    rules: {
      "no-restricted-syntax": ["error", {
        selector: "JSXAttribute[name.name='className'] Literal[value=/(^|\\s)(btn|link-button|icon-button)(\\s|$)/]",
        message: "Use <Button> or <ButtonLink> from shell/Button.tsx (variant, size, icon) instead of writing the btn classes.",
      }, {
        selector: "JSXAttribute[name.name='className'] TemplateElement[value.raw=/(^|\\s)btn(\\s|-|$)/]",
        message: "Use <Button> or <ButtonLink> from shell/Button.tsx (variant, size, icon) instead of writing the btn classes.",
      }],
    },
  },
);
