"""The ground floor every other part stands on: settings (`RunConfig`, `RunPaths`), their one-line docs,
the JSON reader and writer, file digests, the Markdown code-fence grammar. Imports nothing else of tritonrl."""
