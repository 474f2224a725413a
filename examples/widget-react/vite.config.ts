import { defineConfig } from "vite";

// Built as static files with relative paths, served from any folder. React's automatic JSX
// runtime comes from tsconfig.json ("jsx": "react-jsx"), which Vite's transform reads.
export default defineConfig({
  base: "./",
  build: { outDir: "dist", emptyOutDir: true },
});
