// Node kinds as GET /api/v1/node-kinds/ serves them, with config schemas exported from the pydantic configs (runs/nodes/*.py).
import type { NodeKindInfo } from "../store";

export const KINDS: NodeKindInfo[] = [
  {
    "kind": "start",
    "title": "Start",
    "description": "Where a run begins; its input becomes the first state.",
    "category": "logic",
    "config_schema": {
      "additionalProperties": false,
      "description": "Base of every node kind's config model: unknown fields are an error.",
      "properties": {},
      "title": "NodeConfig",
      "type": "object"
    },
    "inputs": [],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": false
  },
  {
    "kind": "end",
    "title": "End",
    "description": "Finish the run and return selected state keys as its result.",
    "category": "logic",
    "config_schema": {
      "additionalProperties": false,
      "description": "``output``: state keys returned as the run's result, in this order; None returns the\nwhole state.",
      "properties": {
        "output": {
          "anyOf": [
            {
              "items": {
                "type": "string"
              },
              "type": "array"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "description": "State keys returned as the run's result (None = the whole state).",
          "title": "Output"
        }
      },
      "title": "EndConfig",
      "type": "object"
    },
    "inputs": [],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": false
  },
  {
    "kind": "transform",
    "title": "Transform",
    "description": "Compute state values from expressions over the current state.",
    "category": "logic",
    "config_schema": {
      "additionalProperties": false,
      "description": "``set``: state key -> expression. Every expression sees the state as it was before\nthis node ran, so the order of keys never changes the result.",
      "properties": {
        "set": {
          "additionalProperties": {
            "type": "string"
          },
          "description": "State key -> expression; all expressions see the state from before this node.",
          "minProperties": 1,
          "title": "Set",
          "type": "object"
        }
      },
      "required": [
        "set"
      ],
      "title": "TransformConfig",
      "type": "object"
    },
    "inputs": [],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": false
  },
  {
    "kind": "condition",
    "title": "Condition",
    "description": "Branch on an expression (true/false) or on cases (first true wins, else default).",
    "category": "logic",
    "config_schema": {
      "$defs": {
        "Case": {
          "additionalProperties": false,
          "description": "One branch of a multi-way condition: taken when ``expression`` is truthy.",
          "properties": {
            "handle": {
              "description": "Source handle taken when the expression is true.",
              "pattern": "^[A-Za-z_][A-Za-z0-9_\\-]{0,63}$",
              "title": "Handle",
              "type": "string"
            },
            "expression": {
              "description": "Expression over the state; truthy selects this case.",
              "title": "Expression",
              "type": "string"
            }
          },
          "required": [
            "handle",
            "expression"
          ],
          "title": "Case",
          "type": "object"
        }
      },
      "additionalProperties": false,
      "description": "Either ``expression`` (handles ``true``/``false``) or ``cases`` (each case's handle,\nplus ``default`` when no case is true). The first true case wins.",
      "properties": {
        "expression": {
          "anyOf": [
            {
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "description": "Two-way condition: handles 'true' and 'false'.",
          "title": "Expression"
        },
        "cases": {
          "anyOf": [
            {
              "items": {
                "$ref": "#/$defs/Case"
              },
              "minItems": 1,
              "type": "array"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "description": "Multi-way condition: first true case wins; 'default' when none is true.",
          "title": "Cases"
        }
      },
      "title": "ConditionConfig",
      "type": "object"
    },
    "inputs": [],
    "outputs": [],
    "dynamic_outputs": true,
    "repeat_safe": true,
    "uses_repeat_safe": false
  },
  {
    "kind": "join",
    "title": "Join",
    "description": "Wait for all parallel branches that can still arrive, then continue once.",
    "category": "logic",
    "config_schema": {
      "additionalProperties": false,
      "description": "Base of every node kind's config model: unknown fields are an error.",
      "properties": {},
      "title": "NodeConfig",
      "type": "object"
    },
    "inputs": [],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": false
  },
  {
    "kind": "tool",
    "title": "Tool",
    "description": "Call a tool (HTTP request, email, your own functions) with arguments from the state.",
    "category": "logic",
    "config_schema": {
      "additionalProperties": false,
      "description": "Config of a ``tool`` node.\n\n- ``tool``: registered tool name.\n- ``args``: the arguments object; string values may be templates rendered against\n  the run state (a string that is exactly ``{{ expr }}`` keeps the value's type).\n- ``output_key``: state key the tool's result is written to (None: not stored in\n  state; the step output still records it).",
      "properties": {
        "tool": {
          "minLength": 1,
          "title": "Tool",
          "type": "string"
        },
        "args": {
          "additionalProperties": true,
          "title": "Args",
          "type": "object"
        },
        "output_key": {
          "anyOf": [
            {
              "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Output Key"
        }
      },
      "required": [
        "tool"
      ],
      "title": "ToolConfig",
      "type": "object"
    },
    "inputs": [],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": true
  },
  {
    "kind": "llm",
    "title": "Llm",
    "description": "Ask a language model; store its reply (text or schema-checked JSON).",
    "category": "logic",
    "config_schema": {
      "additionalProperties": false,
      "description": "Config of an ``llm`` node.\n\n- ``system``/``prompt``: templates rendered against the run state.\n- ``temperature``: None = the provider's default.\n- ``max_tokens``: upper bound of output tokens per call.\n- ``output_key``: the state key the reply (text, or parsed JSON) is written to.\n- ``output_schema``: JSON Schema the reply must satisfy (draft 2020-12 unless\n  ``$schema`` says otherwise), or None for free text.\n- ``schema_retries``: re-asks after an invalid reply, within the step.\n- ``options``: provider-specific options (the mock's ``script``, ``latency_ms`` ...).\n- ``api_key_env``: the environment variable holding the provider's API key (None: the\n  provider's configured default); the provider only reads variables its settings\n  allow.",
      "properties": {
        "provider": {
          "default": "mock",
          "minLength": 1,
          "title": "Provider",
          "type": "string"
        },
        "model": {
          "default": "mock-1",
          "minLength": 1,
          "title": "Model",
          "type": "string"
        },
        "system": {
          "anyOf": [
            {
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "System"
        },
        "prompt": {
          "minLength": 1,
          "title": "Prompt",
          "type": "string"
        },
        "temperature": {
          "anyOf": [
            {
              "maximum": 2,
              "minimum": 0,
              "type": "number"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Temperature"
        },
        "max_tokens": {
          "default": 1024,
          "maximum": 1000000,
          "minimum": 1,
          "title": "Max Tokens",
          "type": "integer"
        },
        "output_key": {
          "default": "reply",
          "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
          "title": "Output Key",
          "type": "string"
        },
        "output_schema": {
          "anyOf": [
            {
              "additionalProperties": true,
              "type": "object"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Output Schema"
        },
        "schema_retries": {
          "default": 2,
          "maximum": 10,
          "minimum": 0,
          "title": "Schema Retries",
          "type": "integer"
        },
        "options": {
          "additionalProperties": true,
          "title": "Options",
          "type": "object"
        },
        "api_key_env": {
          "anyOf": [
            {
              "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,127}$",
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Api Key Env"
        }
      },
      "required": [
        "prompt"
      ],
      "title": "LLMConfig",
      "type": "object"
    },
    "inputs": [],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": true
  },
  {
    "kind": "approval",
    "title": "Approval",
    "description": "Wait for a person to approve or reject (minutes or weeks).",
    "category": "logic",
    "config_schema": {
      "additionalProperties": false,
      "description": "``prompt`` (a template over the state) is shown to the approver; ``approvers`` and\n``approver_groups`` (usernames, group names) say who may decide, empty = anyone with\nthe approver role; the decision is written to state under ``output_key``.",
      "properties": {
        "prompt": {
          "default": "Approve?",
          "maxLength": 10000,
          "title": "Prompt",
          "type": "string"
        },
        "approvers": {
          "items": {
            "type": "string"
          },
          "title": "Approvers",
          "type": "array"
        },
        "approver_groups": {
          "items": {
            "type": "string"
          },
          "title": "Approver Groups",
          "type": "array"
        },
        "output_key": {
          "default": "approval",
          "title": "Output Key",
          "type": "string"
        }
      },
      "title": "ApprovalConfig",
      "type": "object"
    },
    "inputs": [],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": false
  },
  {
    "kind": "agent",
    "title": "Agent",
    "description": "An LLM agent with tools: model turns and tool calls are durable child steps.",
    "category": "logic",
    "config_schema": {
      "additionalProperties": false,
      "description": "Config of an ``agent`` node.\n\n- ``provider``/``model``/``api_key_env``/``options``/``temperature``: as on the llm\n  node (``options`` go to the provider, e.g. the mock's ``script`` with ``turn`` rules).\n- ``system``/``prompt``: templates rendered against the run state (the first turn).\n- ``tools``: registered tool names offered to the model (their descriptions and\n  argument JSON Schemas are sent with every turn).\n- ``max_turns``: model turns at most; a reply that still asks for tools on the last\n  turn fails the step with ``max_turns`` (its tools are not run).\n- ``max_tokens``: output tokens per model turn.\n- ``max_tool_calls_per_turn``: calls beyond this in one reply are not run; the model\n  is told so in their results.\n- ``max_tool_result_chars``: a tool result is cut to this many characters before it\n  is sent back to the model (bounds every later turn's input, and so the budget's\n  worst case).\n- ``output_key``: the state key the final answer (text) is written to.",
      "properties": {
        "provider": {
          "default": "mock",
          "minLength": 1,
          "title": "Provider",
          "type": "string"
        },
        "model": {
          "default": "mock-1",
          "minLength": 1,
          "title": "Model",
          "type": "string"
        },
        "system": {
          "anyOf": [
            {
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "System"
        },
        "prompt": {
          "minLength": 1,
          "title": "Prompt",
          "type": "string"
        },
        "tools": {
          "items": {
            "type": "string"
          },
          "maxItems": 64,
          "minItems": 1,
          "title": "Tools",
          "type": "array"
        },
        "max_turns": {
          "default": 8,
          "maximum": 50,
          "minimum": 1,
          "title": "Max Turns",
          "type": "integer"
        },
        "max_tokens": {
          "default": 1024,
          "maximum": 1000000,
          "minimum": 1,
          "title": "Max Tokens",
          "type": "integer"
        },
        "temperature": {
          "anyOf": [
            {
              "maximum": 2,
              "minimum": 0,
              "type": "number"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Temperature"
        },
        "max_tool_calls_per_turn": {
          "default": 8,
          "maximum": 64,
          "minimum": 1,
          "title": "Max Tool Calls Per Turn",
          "type": "integer"
        },
        "max_tool_result_chars": {
          "default": 20000,
          "maximum": 1000000,
          "minimum": 100,
          "title": "Max Tool Result Chars",
          "type": "integer"
        },
        "output_key": {
          "default": "answer",
          "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
          "title": "Output Key",
          "type": "string"
        },
        "api_key_env": {
          "anyOf": [
            {
              "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,127}$",
              "type": "string"
            },
            {
              "type": "null"
            }
          ],
          "default": null,
          "title": "Api Key Env"
        },
        "options": {
          "additionalProperties": true,
          "title": "Options",
          "type": "object"
        }
      },
      "required": [
        "prompt",
        "tools"
      ],
      "title": "AgentConfig",
      "type": "object"
    },
    "inputs": [],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": false
  }
];
