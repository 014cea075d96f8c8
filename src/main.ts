import { exitOnStartFailure, serve } from './serve.js';

// `npm start`: the service, configured from the environment (README). `latchkey serve`
// (cli.ts) starts it the same way.
serve().catch(exitOnStartFailure);
