// A node card's connection handle: React Flow's <Handle> without its per-handle store subscription.
import { addEdge, useStoreApi, type Connection, type Position } from "@xyflow/react";
import { XYHandle, getHostForElement, isMouseEvent } from "@xyflow/system";
import type { MouseEvent as ReactMouseEvent, ReactNode, TouchEvent as ReactTouchEvent } from "react";

export interface FlowHandleProps {
  nodeId: string;
  type: "source" | "target";
  position: Position;
  id?: string | undefined;
  isConnectable: boolean;
  className: string;
  children?: ReactNode;
  "data-handle"?: string;
}

/**
 * The same element, classes, data attributes and connection start (drag from it, or click
 * it then another handle) as React Flow's `<Handle>` (@xyflow/react 12, Handle/index.tsx), but
 * it reads the store only when pressed. React Flow's subscribes every handle to the store (its
 * connection-in-progress state, checked on every store update): two to four handles a card,
 * i.e. 600-1,200 selector calls per drag frame on a 300-node canvas. What is given up: the
 * classes that only restyle handles while a connection is being drawn (`connectingfrom`,
 * `connectingto`, `valid`, `clickconnecting`, and `connectionindicator` taken off handles that
 * cannot end it), none of which the builder's CSS styles; a connectable handle keeps
 * `connectionindicator` (crosshair, pointer events) throughout.
 */
export function FlowHandle({ nodeId, type, position, id, isConnectable, className, children, ...rest }: FlowHandleProps) {
  const store = useStoreApi();
  const handleId = id ?? null;
  const isTarget = type === "target";
  // Constant for the canvas's life (the flow's id and props): read once, not subscribed.
  const { rfId, noPanClassName, connectOnClick } = store.getState();

  const onConnectExtended = (params: Connection) => {
    const { defaultEdgeOptions, onConnect, hasDefaultEdges } = store.getState();
    const edgeParams = { ...defaultEdgeOptions, ...params };
    if (hasDefaultEdges) {
      const { edges, setEdges, onError } = store.getState();
      setEdges(addEdge(edgeParams, edges, { onError }));
    }
    onConnect?.(edgeParams);
  };

  const onPointerDown = (event: ReactMouseEvent<HTMLDivElement> | ReactTouchEvent<HTMLDivElement>) => {
    const native = event.nativeEvent;
    const isMouse = isMouseEvent(native);
    if (isMouse && (native as MouseEvent).button !== 0) return;
    const s = store.getState();
    XYHandle.onPointerDown(native, {
      handleDomNode: event.currentTarget,
      autoPanOnConnect: s.autoPanOnConnect,
      connectionMode: s.connectionMode,
      connectionRadius: s.connectionRadius,
      domNode: s.domNode,
      nodeLookup: s.nodeLookup,
      lib: s.lib,
      isTarget,
      handleId,
      nodeId,
      flowId: s.rfId,
      panBy: s.panBy,
      cancelConnection: s.cancelConnection,
      onConnectStart: s.onConnectStart,
      onConnectEnd: (...args) => store.getState().onConnectEnd?.(...args),
      updateConnection: s.updateConnection,
      onConnect: onConnectExtended,
      isValidConnection: (...args) => store.getState().isValidConnection?.(...args) ?? true,
      getTransform: () => store.getState().transform,
      getFromHandle: () => store.getState().connection.fromHandle,
      autoPanSpeed: s.autoPanSpeed,
      dragThreshold: s.connectionDragThreshold,
    });
  };

  const onClick = (event: ReactMouseEvent<HTMLDivElement>) => {
    const { onClickConnectStart, onClickConnectEnd, connectionClickStartHandle, connectionMode, isValidConnection, lib, nodeLookup, connection: connectionState } = store.getState();
    if (!connectionClickStartHandle) {
      onClickConnectStart?.(event.nativeEvent, { nodeId, handleId, handleType: type });
      store.setState({ connectionClickStartHandle: { nodeId, type, id: handleId } });
      return;
    }
    const { connection, isValid } = XYHandle.isValid(event.nativeEvent, {
      handle: { nodeId, id: handleId, type },
      connectionMode,
      fromNodeId: connectionClickStartHandle.nodeId,
      fromHandleId: connectionClickStartHandle.id || null,
      fromType: connectionClickStartHandle.type,
      isValidConnection,
      flowId: rfId,
      doc: getHostForElement(event.target as HTMLElement),
      lib,
      nodeLookup,
    });
    if (isValid && connection) onConnectExtended(connection);
    const connectionClone = structuredClone(connectionState) as Partial<typeof connectionState>;
    delete connectionClone.inProgress;
    connectionClone.toPosition = connectionClone.toHandle ? connectionClone.toHandle.position : null;
    onClickConnectEnd?.(event.nativeEvent, connectionClone as Parameters<NonNullable<typeof onClickConnectEnd>>[1]);
    store.setState({ connectionClickStartHandle: null });
  };

  const classes = `react-flow__handle react-flow__handle-${position} nodrag ${noPanClassName} ${className} ${type}`
    + `${isConnectable ? " connectable" : ""} connectablestart connectableend${isConnectable ? " connectionindicator" : ""}`;
  return (
    <div data-handleid={handleId} data-nodeid={nodeId} data-handlepos={position} data-id={`${rfId}-${nodeId}-${handleId}-${type}`}
      className={classes} onMouseDown={onPointerDown} onTouchStart={onPointerDown} onClick={connectOnClick ? onClick : undefined} {...rest}>
      {children}
    </div>
  );
}
