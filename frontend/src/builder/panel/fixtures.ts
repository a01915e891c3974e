// Node kinds as GET /api/v1/node-kinds/ serves them, with config schemas exported from the pydantic configs (runs/nodes/*.py).
import type { NodeKindInfo } from "../store";

export const KINDS: NodeKindInfo[] = [
  {
    "kind": "start",
    "title": "Start",
    "description": "Where a run begins; its input becomes the first state.",
    "category": "flow",
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
    "uses_repeat_safe": false,
    "does_work": false,
    "can_loop": false
  },
  {
    "kind": "end",
    "title": "End",
    "description": "Finish the run and return selected state keys as its result.",
    "category": "flow",
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
          "description": "State keys returned as the run's result. Leave empty to return the whole state.",
          "title": "Output state keys"
        }
      },
      "title": "EndConfig",
      "type": "object"
    },
    "inputs": [
      "in"
    ],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": false,
    "does_work": false,
    "can_loop": false
  },
  {
    "kind": "transform",
    "title": "Transform",
    "description": "Compute state values from expressions over the current state.",
    "category": "data",
    "config_schema": {
      "additionalProperties": false,
      "description": "``set``: state key -> expression. Every expression sees the state as it was before\nthis node ran, so the order of keys never changes the result.",
      "properties": {
        "set": {
          "additionalProperties": {
            "type": "string"
          },
          "description": "Each state key gets the value of its expression; every expression sees the state from before this node.",
          "minProperties": 1,
          "title": "State keys to set",
          "type": "object"
        }
      },
      "required": [
        "set"
      ],
      "title": "TransformConfig",
      "type": "object"
    },
    "inputs": [
      "in"
    ],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": false,
    "does_work": true,
    "can_loop": true
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
          "description": "One branch of a multi-way condition: taken when its expression is true.",
          "properties": {
            "handle": {
              "description": "The outgoing handle taken when the expression is true.",
              "pattern": "^[A-Za-z_][A-Za-z0-9_\\-]{0,63}$",
              "title": "Handle",
              "type": "string"
            },
            "expression": {
              "description": "Expression over the state; when true, this case is taken.",
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
          "description": "Two-way condition: takes the handle 'true' or 'false'.",
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
    "inputs": [
      "in"
    ],
    "outputs": [
      "true",
      "false"
    ],
    "dynamic_outputs": true,
    "repeat_safe": true,
    "uses_repeat_safe": false,
    "does_work": true,
    "can_loop": true
  },
  {
    "kind": "join",
    "title": "Join",
    "description": "Wait for all parallel branches that can still arrive, then continue once.",
    "category": "flow",
    "config_schema": {
      "additionalProperties": false,
      "description": "Base of every node kind's config model: unknown fields are an error.",
      "properties": {},
      "title": "NodeConfig",
      "type": "object"
    },
    "inputs": [
      "in"
    ],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": false,
    "does_work": false,
    "can_loop": true
  },
  {
    "kind": "tool",
    "title": "Tool",
    "description": "Call a tool (HTTP request, email, your own functions) with arguments from the state.",
    "category": "tools",
    "config_schema": {
      "additionalProperties": false,
      "description": "Config of a ``tool`` node.\n\n- ``tool``: registered tool name.\n- ``args``: the arguments object; string values may be templates rendered against\n  the run state (a string that is exactly ``{{ expr }}`` keeps the value's type).\n- ``output_key``: state key the tool's result is written to (None: not stored in\n  state; the step output still records it).",
      "properties": {
        "tool": {
          "description": "A registered tool.",
          "minLength": 1,
          "title": "Tool",
          "type": "string"
        },
        "args": {
          "additionalProperties": true,
          "description": "The tool's arguments; text values may be templates, e.g. {{ order_id }}.",
          "title": "Arguments",
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
          "description": "The state key the result is written to; leave empty to keep it out of the state.",
          "title": "Output state key"
        }
      },
      "required": [
        "tool"
      ],
      "title": "ToolConfig",
      "type": "object"
    },
    "inputs": [
      "in"
    ],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": true,
    "does_work": true,
    "can_loop": true
  },
  {
    "kind": "llm",
    "title": "LLM",
    "description": "Ask a language model; store its reply (text or schema-checked JSON).",
    "category": "ai",
    "config_schema": {
      "additionalProperties": false,
      "description": "Config of an ``llm`` node: the model call (:class:`LLMCallConfig`) plus\n\n- ``output_key`` (default ``reply``): the state key the reply (text, or parsed JSON)\n  is written to.\n- ``output_schema``: JSON Schema the reply must satisfy (draft 2020-12 unless\n  ``$schema`` says otherwise), or None for free text.\n- ``schema_retries``: re-asks after an invalid reply, within the step.",
      "properties": {
        "provider": {
          "default": "mock",
          "description": "A registered LLM provider.",
          "minLength": 1,
          "title": "Provider",
          "type": "string"
        },
        "model": {
          "default": "mock-1",
          "description": "One of the provider's models.",
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
          "description": "Template over the state, sent first as the system message.",
          "title": "System prompt"
        },
        "prompt": {
          "description": "Template over the state, e.g. Summarise {{ text }}.",
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
          "description": "0 to 2; leave empty for the provider's default.",
          "title": "Temperature"
        },
        "max_tokens": {
          "default": 1024,
          "description": "Upper bound of the reply's tokens per call; budgets rely on it.",
          "maximum": 1000000,
          "minimum": 1,
          "title": "Maximum output tokens",
          "type": "integer"
        },
        "options": {
          "additionalProperties": true,
          "description": "Provider-specific settings as JSON, checked before a run starts.",
          "title": "Provider options",
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
          "description": "Name of the environment variable holding the API key (never the key itself); leave empty for the provider's default.",
          "title": "API key environment variable"
        },
        "output_key": {
          "default": "reply",
          "description": "The state key the reply is written to.",
          "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
          "title": "Output state key",
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
          "description": "A JSON Schema the reply must match; leave empty for free text.",
          "title": "Reply schema"
        },
        "schema_retries": {
          "default": 2,
          "description": "How often the model is asked again when its reply does not match the schema.",
          "maximum": 10,
          "minimum": 0,
          "title": "Re-asks after an invalid reply",
          "type": "integer"
        }
      },
      "required": [
        "prompt"
      ],
      "title": "LLMConfig",
      "type": "object"
    },
    "inputs": [
      "in"
    ],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": true,
    "does_work": true,
    "can_loop": true
  },
  {
    "kind": "approval",
    "title": "Approval",
    "description": "Wait for a person to approve or reject (minutes or weeks).",
    "category": "human",
    "config_schema": {
      "additionalProperties": false,
      "description": "``prompt`` (a template over the state) is shown to the approver; ``approvers`` and\n``approver_groups`` (usernames, group names) say who may decide, empty = anyone with\nthe approver role; the decision is written to state under ``output_key``.",
      "properties": {
        "prompt": {
          "default": "Approve?",
          "description": "Shown to the approver; a template over the state.",
          "maxLength": 10000,
          "title": "Prompt",
          "type": "string"
        },
        "approvers": {
          "description": "Usernames who may decide; leave empty for anyone with the approver role.",
          "items": {
            "type": "string"
          },
          "title": "Approvers",
          "type": "array"
        },
        "approver_groups": {
          "description": "Groups whose members may decide.",
          "items": {
            "type": "string"
          },
          "title": "Approver groups",
          "type": "array"
        },
        "output_key": {
          "default": "approval",
          "description": "The state key the decision is written to.",
          "title": "Output state key",
          "type": "string"
        }
      },
      "title": "ApprovalConfig",
      "type": "object"
    },
    "inputs": [
      "in"
    ],
    "outputs": [
      "approved",
      "rejected"
    ],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": false,
    "does_work": true,
    "can_loop": true
  },
  {
    "kind": "agent",
    "title": "Agent",
    "description": "An LLM agent with tools: model turns and tool calls are durable child steps.",
    "category": "ai",
    "config_schema": {
      "additionalProperties": false,
      "description": "Config of an ``agent`` node: the model call of every turn (:class:`LLMCallConfig`;\n``system``/``prompt`` start the conversation, ``max_tokens`` bounds each turn's\noutput, ``options`` go to the provider, e.g. the mock's ``script`` with ``turn``\nrules) plus\n\n- ``tools``: registered tool names offered to the model (their descriptions and\n  argument JSON Schemas are sent with every turn).\n- ``repeat_safe_tools``: tool name (one of ``tools``) -> whether a call of it that a\n  crash interrupted may simply run again, overriding the tool's own ``repeat_safe``\n  (``{\"http_request\": true}`` for a GET the agent may repeat; ``{\"kb_search\":\n  false}`` to have a person decide). A tool not named follows its own setting. A\n  call that is not safe to repeat is parked for a person after a crash (retry, skip\n  with a given result, which the model then sees as the tool's result, or fail).\n- ``max_turns``: model turns at most; a reply that still asks for tools on the last\n  turn fails the step with ``max_turns`` (its tools are not run).\n- ``max_tool_calls_per_turn``: calls beyond this in one reply are not run; the model\n  is told so in their results.\n- ``max_tool_result_chars``: a tool result is cut to this many characters before it\n  is sent back to the model (bounds every later turn's input, and so the budget's\n  worst case).\n- ``output_key`` (default ``answer``): the state key the final answer (text) is\n  written to.",
      "properties": {
        "provider": {
          "default": "mock",
          "description": "A registered LLM provider.",
          "minLength": 1,
          "title": "Provider",
          "type": "string"
        },
        "model": {
          "default": "mock-1",
          "description": "One of the provider's models.",
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
          "description": "Template over the state, sent first as the system message.",
          "title": "System prompt"
        },
        "prompt": {
          "description": "Template over the state, e.g. Summarise {{ text }}.",
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
          "description": "0 to 2; leave empty for the provider's default.",
          "title": "Temperature"
        },
        "max_tokens": {
          "default": 1024,
          "description": "Upper bound of the reply's tokens per call; budgets rely on it.",
          "maximum": 1000000,
          "minimum": 1,
          "title": "Maximum output tokens",
          "type": "integer"
        },
        "options": {
          "additionalProperties": true,
          "description": "Provider-specific settings as JSON, checked before a run starts.",
          "title": "Provider options",
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
          "description": "Name of the environment variable holding the API key (never the key itself); leave empty for the provider's default.",
          "title": "API key environment variable"
        },
        "output_key": {
          "default": "answer",
          "description": "The state key the final answer is written to.",
          "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
          "title": "Output state key",
          "type": "string"
        },
        "tools": {
          "description": "Registered tools the model may call.",
          "items": {
            "type": "string"
          },
          "maxItems": 64,
          "minItems": 1,
          "title": "Tools",
          "type": "array"
        },
        "repeat_safe_tools": {
          "additionalProperties": {
            "type": "boolean"
          },
          "description": "Per tool: whether a call interrupted by a crash may run again (overrides the tool's own setting).",
          "title": "Tools safe to repeat",
          "type": "object"
        },
        "max_turns": {
          "default": 8,
          "description": "Model calls at most; a reply still asking for tools on the last turn fails the step.",
          "maximum": 50,
          "minimum": 1,
          "title": "Maximum model turns",
          "type": "integer"
        },
        "max_tool_calls_per_turn": {
          "default": 8,
          "description": "Calls beyond this in one reply are not run; the model is told so.",
          "maximum": 64,
          "minimum": 1,
          "title": "Maximum tool calls per turn",
          "type": "integer"
        },
        "max_tool_result_chars": {
          "default": 20000,
          "description": "A tool result is cut to this length before the model sees it.",
          "maximum": 1000000,
          "minimum": 100,
          "title": "Maximum tool result length (characters)",
          "type": "integer"
        }
      },
      "required": [
        "prompt",
        "tools"
      ],
      "title": "AgentConfig",
      "type": "object"
    },
    "inputs": [
      "in"
    ],
    "outputs": [],
    "dynamic_outputs": false,
    "repeat_safe": true,
    "uses_repeat_safe": false,
    "does_work": true,
    "can_loop": true
  }
];
