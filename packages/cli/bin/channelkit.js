#!/usr/bin/env node
// The `channelkit` command. npm links a package's bins when it installs it, before the
// monorepo's `prepare` has built dist/: this file is there from the start, so the link is.
import "../dist/bin.js";
