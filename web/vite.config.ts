import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// `npm run build:web` and the server's own build (src/cli/web-build.ts) both use this.
export default defineConfig({
  root: import.meta.dirname,
  plugins: [react()],
  build: { outDir: "dist", emptyOutDir: true },
});
