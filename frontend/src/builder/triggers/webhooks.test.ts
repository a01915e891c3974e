import type { Delivery } from "../../api/types";
import { describe, expect, it } from "vitest";
import { clock, deliveryOutcome, inputFields, mappingFromRows, rowsFromMapping, secondsLeft, splitFieldErrors } from "./webhooks";

const delivery = (over: Partial<Delivery>): Delivery => ({
  id: 1, delivery_id: "", received_at: "2026-01-01T00:00:00Z", status_code: 202, run: null, replayed: false, error: null, payload: null, ...over,
});

describe("webhook helpers", () => {
  it("turns mapping rows into the API's object and back, dropping blank rows", () => {
    const rows = [{ field: " x ", source: " /order/qty " }, { field: "", source: "/ignored" }, { field: "event", source: "header:X-Event" }];
    expect(mappingFromRows(rows)).toEqual({ x: "/order/qty", event: "header:X-Event" });
    expect(rowsFromMapping({ x: "" })).toEqual([{ field: "x", source: "" }]);
  });

  it("places field errors the form has and lists the others", () => {
    const split = splitFieldErrors({ name: ["Taken."], "input_mapping.x": ["Required."], run_as: ["Not an operator."] }, ["name", "version"]);
    expect(split.byField).toEqual({ name: "Taken.", "input_mapping.x": "Required." });
    expect(split.rest).toEqual(["run_as: Not an operator."]);
  });

  it("counts down a listen in whole seconds and never below zero", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(secondsLeft("2026-01-01T00:01:59.500Z", now)).toBe(120);
    expect(secondsLeft("2025-12-31T23:59:00Z", now)).toBe(0);
    expect(secondsLeft(null, now)).toBe(0);
    expect(clock(119)).toBe("1:59");
  });

  it("says what a delivery did", () => {
    expect(deliveryOutcome(delivery({ run: 7 }))).toBe("run #7");
    expect(deliveryOutcome(delivery({ run: 7, replayed: true }))).toBe("run #7 (repeated delivery id)");
    expect(deliveryOutcome(delivery({ status_code: 401, error: { code: "signature_invalid", message: "The signature does not match." } }))).toBe("The signature does not match.");
    expect(deliveryOutcome(delivery({ payload: { x: 1 } }))).toMatch(/captured/);
  });

  it("offers the input schema's properties as mapping targets", () => {
    expect(inputFields({ type: "object", properties: { x: {}, y: {} } })).toEqual(["x", "y"]);
    expect(inputFields(undefined)).toEqual([]);
  });
});
