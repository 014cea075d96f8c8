import type { BuildOptions } from 'esbuild';

/** The package's folder. */
export declare const CLIENT_DIR: string;
/** The standalone ES module's file name in dist/. */
export declare const STANDALONE_FILE: string;
/** The esbuild `build()` options of a one-file, minified build of the client (see esbuild-options.mjs). */
export declare function oneFileOptions(format: 'esm' | 'iife'): BuildOptions & { write: false };
