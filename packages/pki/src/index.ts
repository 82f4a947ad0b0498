// Nothing is exported yet: this package's issue comes later (see the README).
export {};
