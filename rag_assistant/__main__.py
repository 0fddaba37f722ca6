from rag_assistant.cli import main

main()
