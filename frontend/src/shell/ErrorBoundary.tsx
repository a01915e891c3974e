// Catches a page component's render error and shows it, instead of a blank page.
import { Component, type ReactNode } from "react";
import { Button } from "./Button";

interface State { error: Error | null }

export class ErrorBoundary extends Component<{ children: ReactNode }, State> {
  override state: State = { error: null };

  static getDerivedStateFromError(error: Error): State {
    return { error };
  }

  override render(): ReactNode {
    if (this.state.error) {
      return (
        <main className="page">
          <div className="alert alert-error" role="alert">
            <strong>This page failed to load.</strong> {this.state.error.message}
            <div><Button size="small" onClick={() => window.location.reload()}>Reload</Button></div>
          </div>
        </main>
      );
    }
    return this.props.children;
  }
}
