// A version diff as a readable list: logic changes first, layout changes (positions, notes) apart.
import type { VersionDiff } from "../../api/types";
import { displayValue } from "../panel/format";
import { diffItems, type DiffItem } from "./diff";
import { Button } from "../../shell/Button";

const SIGN: Record<DiffItem["change"], string> = { added: "+", removed: "−", changed: "~" };

function Item({ item, onSelectNode }: { item: DiffItem; onSelectNode?(id: string): void }) {
  return (
    <li className={`diff-item diff-${item.change}`}>
      <span className="diff-sign" aria-hidden="true">
        {SIGN[item.change]}
      </span>
      <span className="visually-hidden">{item.change} </span>
      <span className="diff-subject">{item.subject}</span>{" "}
      {item.node && onSelectNode ? (
        <Button variant="link" onClick={() => onSelectNode(item.node!)}>
          <code>{item.name}</code>
        </Button>
      ) : (
        <code>{item.name}</code>
      )}
      {item.fields && item.fields.length > 0 && (
        <ul className="diff-fields">
          {item.fields.map((f) => (
            <li key={f.name}>
              <span className="diff-field-name">{f.name}</span>: <del>{displayValue(f.from)}</del> → <ins>{displayValue(f.to)}</ins>
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}

interface Props {
  diff: VersionDiff;
  onSelectNode?(id: string): void;
}

/** Lists what changed from ``diff.from`` to ``diff.to``. */
export function DiffList({ diff, onSelectNode }: Props) {
  const { logic, layout } = diffItems(diff);
  return (
    <section className="diff-list" aria-label={`Changes from version ${diff.from} to ${diff.to}`}>
      <h3>
        Version {diff.from} → {diff.to}
      </h3>
      {logic.length === 0 ? (
        <p className="panel-empty">{layout.length === 0 ? "The two versions are identical." : "No changes to the graph's logic."}</p>
      ) : (
        <ul className="diff-items">
          {logic.map((item, i) => (
            <Item key={i} item={item} onSelectNode={onSelectNode} />
          ))}
        </ul>
      )}
      {layout.length > 0 && (
        <>
          <h4>Layout only</h4>
          <p className="field-help">Positions and sticky notes: runs behave the same.</p>
          <ul className="diff-items diff-layout">
            {layout.map((item, i) => (
              <Item key={i} item={item} onSelectNode={onSelectNode} />
            ))}
          </ul>
        </>
      )}
    </section>
  );
}
