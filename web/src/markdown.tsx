// Assistant text as Markdown through maintained libraries: react-markdown with GitHub's
// extensions (tables, task lists, strikethrough, autolinks), sanitised by rehype-sanitize
// (GitHub's schema: no raw HTML, no script URLs; react-markdown never renders raw HTML anyway),
// then code blocks highlighted by rehype-highlight (highlight.js's common languages).

import Markdown, { type Components } from "react-markdown";
import rehypeHighlight from "rehype-highlight";
import rehypeSanitize from "rehype-sanitize";
import remarkGfm from "remark-gfm";

const COMPONENTS: Components = {
  // Links leave the app in a new tab and tell the target nothing about it.
  a: ({ node: _node, ...props }) => <a {...props} target="_blank" rel="noreferrer noopener" />,
};

export default function MarkdownText({ text }: { text: string }) {
  return (
    <div className="md text">
      <Markdown
        remarkPlugins={[remarkGfm]}
        rehypePlugins={[rehypeSanitize, rehypeHighlight]}
        components={COMPONENTS}
      >
        {text}
      </Markdown>
    </div>
  );
}
