"""The file layer: no-follow IO, the one atomic write and its temp sweep, file stamps, change
watches, the runtime dir and its names, the appending notebook file. Knows no docs and no kernel."""
