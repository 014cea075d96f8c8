/** The generated module, relative to the repository. */
export declare const DEMO_CLIENT_FILE: string;
/** Bundles the client from its sources and returns the generated module (see demo-client-bundle.mjs). */
export declare function demoClientFile(): Promise<{ path: string; text: string; script: string }>;
