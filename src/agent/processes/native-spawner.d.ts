// Types of native-spawner.js.

export function nativeSpawner(source: string, outDir: string): string | undefined;
