import { h } from "/ui/dom.js";
