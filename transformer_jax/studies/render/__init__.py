"""The render room: a study's record turned into what people read. Pages and the results index
(pages), the verdict's words (verdict_text), figures (plots, forest), TensorBoard's comparison
runs (board), and the markdown and interval helpers they share (markdown, bounds); a generated
file or marked region written or checked one way, and the Jinja2 templates pages are rendered
through, for every page generator of the project (generated, templating). It reads records; it runs nothing and judges nothing.
"""
