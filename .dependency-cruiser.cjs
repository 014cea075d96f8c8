/**
 * Module boundaries of Latchkey, checked by dependency-cruiser in `npm test` (`npm run lint:deps`).
 * The rules are described in README.md ("Layout", "Module boundaries").
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: 'no-cross-module-repo',
      severity: 'error',
      comment:
        "A module's *.repo.ts is private to it: another module uses the module's tables through what it exports from its " +
        '<module>.shared.ts (functions taking the Queryable, SQL fragments) or its service (README.md, "Module boundaries").',
      from: { path: '^src/modules/([^/]+)/' },
      to: { path: '^src/modules/[^/]+/.+[.]repo[.]ts$', pathNot: '^src/modules/$1/' },
    },
    {
      name: 'no-repo-outside-modules',
      severity: 'error',
      comment: "Code outside src/modules/ (wiring, plugins, metrics, CLI support) reaches a module's tables through its *.shared.ts or service too.",
      from: { path: '^src/', pathNot: '^src/modules/' },
      to: { path: '^src/modules/[^/]+/.+[.]repo[.]ts$' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycle in src/, type-only imports included.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'src-not-to-tests-or-tools',
      severity: 'error',
      comment: 'The service never imports tests, benchmarks, scripts, examples or the client packages (they are not shipped with it).',
      from: { path: '^src/' },
      to: { path: '^(test|bench|scripts|examples|packages)/' },
    },
    {
      name: 'src-not-to-dev-deps',
      severity: 'error',
      comment: 'The service imports only its dependencies: devDependencies are not installed where it runs.',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'Every import resolves.',
      from: { path: '^src/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
