// The Playground executable arrives with its own change.
print("Playground")
